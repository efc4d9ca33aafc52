package queue

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHeldMailExpiresAtItsDeadline: a mail whose recipient stays
// suppressed under a lane that holds such mail is checked again no later
// than its not-after deadline, and fails as expired at the first claim
// past it, instead of being held again at every claim for ever.
func TestHeldMailExpiresAtItsDeadline(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		hold := &Screen{ClaimFunc: func(_ context.Context, _ DBTX, _ string, mails []Claimed) (map[int64]Verdict, error) {
			out := map[int64]Verdict{}
			for _, m := range mails {
				out[m.ID] = Verdict{Suppression: Suppression{Reason: "complaint", Since: clock.Now()}, Hold: time.Hour}
			}
			return out, nil
		}}
		q := newQueue(t, s.db, Lane{Screen: hold}, clock)
		deadline := clock.Now().Add(30 * time.Minute)
		id, err := q.Enqueue(ctx, s.db, testMessage("held@example.com"), NotAfter(deadline))
		require.NoError(t, err)
		jobs, err := q.claim(ctx, "w.1", 10, time.Minute, nil)
		require.NoError(t, err)
		assert.Empty(t, jobs, "held, not sent")
		r := readRow(t, q, id)
		require.Equal(t, KindHeld, r.LastKind, "held while its deadline is ahead: the address may yet be released")
		assert.Equal(t, deadline.UnixMilli(), r.NextRun, "checked again at its deadline, not an hour later")
		for i := range 3 {
			clock.Advance(time.Hour + time.Second)
			jobs, err = q.claim(ctx, "w."+strconv.Itoa(2+i), 10, time.Minute, nil)
			require.NoError(t, err)
			assert.Empty(t, jobs)
		}
		r = readRow(t, q, id)
		assert.Equal(t, StatusFailed, r.Status, "the deadline passed 3 hours ago; row: %+v", r)
		assert.Equal(t, kindExpired, r.LastKind)
		assert.Contains(t, r.LastError, "held")
	})
}

// TestThrottledMailExpiresAtItsDeadline: a mail its lane's throttle gives
// back at the claim fails as expired when it would be due again only after
// its not-after deadline, instead of waiting past it; and one claimed past
// its deadline is never given back again (it was at every claim for as
// long as the throttle refused it, dispatch's check coming after).
func TestThrottledMailExpiresAtItsDeadline(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		wait := time.Hour
		throttle := &Throttle{ScreenFunc: func(_ context.Context, _ DBTX, addrs []string) ([]time.Duration, error) {
			out := make([]time.Duration, len(addrs))
			for i := range out {
				out[i] = wait
			}
			return out, nil
		}}
		q := newQueue(t, s.db, Lane{Throttle: throttle}, clock)

		soon, err := q.Enqueue(ctx, s.db, testMessage("soon@example.com"), NotAfter(clock.Now().Add(30*time.Minute)))
		require.NoError(t, err)
		later, err := q.Enqueue(ctx, s.db, testMessage("later@example.com"), NotAfter(clock.Now().Add(2*time.Hour)))
		require.NoError(t, err)
		jobs, err := q.claim(ctx, "w.1", 10, time.Minute, nil)
		require.NoError(t, err)
		assert.Empty(t, jobs, "both wait for the throttle")
		r := readRow(t, q, soon)
		assert.Equal(t, StatusFailed, r.Status, "due again an hour later, after its deadline: row %+v", r)
		assert.Equal(t, kindExpired, r.LastKind)
		assert.Zero(t, r.Attempts, "never tried")
		r = readRow(t, q, later)
		assert.Equal(t, StatusPending, r.Status, "due again before its deadline")
		assert.Equal(t, clock.Now().Add(time.Hour).UnixMilli(), r.NextRun)

		// The deadline passes while the mail waits (its throttle wait
		// shortened to a second, the next claim comes late).
		wait = time.Second
		clock.Advance(2*time.Hour + time.Minute)
		jobs, err = q.claim(ctx, "w.2", 10, time.Minute, nil)
		require.NoError(t, err)
		assert.Empty(t, jobs)
		r = readRow(t, q, later)
		assert.Equal(t, StatusFailed, r.Status, "claimed past its deadline: not given back again; row %+v", r)
		assert.Equal(t, kindExpired, r.LastKind)
	})
}

// TestMailRefusedBySendLimitsPastItsDeadlineExpires: a mail the lane's
// send limits refuse just before the send, due again only after its
// not-after deadline, fails as expired at once, observed as such.
func TestMailRefusedBySendLimitsPastItsDeadlineExpires(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		throttle := &Throttle{AcquireFunc: func(context.Context, ThrottledSend) (func(error), time.Duration, error) {
			return nil, time.Hour, nil
		}}
		q := newQueue(t, s.db, Lane{Throttle: throttle}, clock)
		soon, err := q.Enqueue(ctx, s.db, testMessage("soon@example.com"), NotAfter(clock.Now().Add(30*time.Minute)))
		require.NoError(t, err)
		later, err := q.Enqueue(ctx, s.db, testMessage("later@example.com"), NotAfter(clock.Now().Add(2*time.Hour)))
		require.NoError(t, err)

		var mu sync.Mutex
		var outcomes []OutcomeEvent
		rec := &recorder{}
		w, err := NewWorker(q, rec, &WorkerOptions{Batch: 10, Concurrency: 2, CleanupInterval: -1, Logger: quietLogger(),
			Observer: &Observer{OutcomeFunc: func(e OutcomeEvent) { mu.Lock(); outcomes = append(outcomes, e); mu.Unlock() }}})
		require.NoError(t, err)
		n, err := oneBatch(ctx, w, 10)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		assert.Empty(t, rec.messages(), "the limits refused both")

		r := readRow(t, q, soon)
		assert.Equal(t, StatusFailed, r.Status, "due again after its deadline: row %+v", r)
		assert.Equal(t, kindExpired, r.LastKind)
		assert.Zero(t, r.Attempts)
		r = readRow(t, q, later)
		assert.Equal(t, StatusPending, r.Status)
		assert.Equal(t, clock.Now().Add(time.Hour).UnixMilli(), r.NextRun)
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, outcomes, 1, "the expired mail's outcome is observed; the other was only given back")
		assert.Equal(t, soon, outcomes[0].ID)
		assert.Equal(t, kindExpired, outcomes[0].Kind)
		assert.Equal(t, StatusFailed, outcomes[0].Status)
		assert.False(t, outcomes[0].Sent)
	})
}

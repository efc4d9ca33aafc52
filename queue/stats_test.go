package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStatsCleanupAndMigrate(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		require.NoError(t, Migrate(ctx, s.db), "Migrate is idempotent")
		require.NoError(t, Migrate(ctx, s.db, "mail_marketing"), "a second lane table")
		clock := newManualClock()
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, clock)
		ids := enqueueN(t, q, 10)
		set := func(id int64, status int, nextRun time.Time) {
			_, err := s.db.Exec(rebindFor(t, s.db, `UPDATE `+q.table+` SET status = ?, next_run = ? WHERE id = ?`), status, nextRun.UnixMilli(), id)
			require.NoError(t, err)
		}
		now := clock.Now()
		set(ids[0], StatusSent, now.Add(-10*time.Minute))
		set(ids[1], StatusSent, now.Add(-20*time.Minute))
		set(ids[2], StatusSent, now.Add(-20*time.Minute))
		set(ids[3], StatusFailed, now.Add(-30*time.Minute))
		set(ids[4], StatusSent, now.Add(-2*time.Hour))       // not in the last hour
		set(ids[5], StatusSending, now.Add(-6*time.Minute))  // lease ended 6 minutes ago: stuck
		set(ids[6], StatusSending, now.Add(time.Minute))     // leased
		set(ids[7], StatusRetry, now.Add(time.Hour))         // deferred
		set(ids[8], StatusSent, now.Add(-31*24*time.Hour))   // old enough to delete
		set(ids[9], StatusFailed, now.Add(-31*24*time.Hour)) // failed rows are kept 90 days

		st, err := q.Stats(ctx)
		require.NoError(t, err)
		assert.Equal(t, Stats{Backlog: 3, Retry: 1, Sending: 2, SentLastHour: 3, FailedLastHour: 1, FailureRate: 0.25, Stuck: 1}, st)

		var progress []int64
		n, err := q.Cleanup(ctx, Retention{Batch: 1, Pause: time.Millisecond}, func(total int64) { progress = append(progress, total) })
		require.NoError(t, err)
		assert.EqualValues(t, 1, n)
		assert.Equal(t, []int64{1}, progress)
		assert.Equal(t, 0, countRows(t, s.db, q.table, "id = ?", ids[8]))
		assert.Equal(t, 9, countRows(t, s.db, q.table, "1=1"), "nothing else deleted, least of all sending rows")
		bodiesKept := func() {
			if s.name == "sqlite" {
				assert.Equal(t, countRows(t, s.db, q.table, "1=1"), countRows(t, s.db, q.bodies, "1=1"), "the bodies of exactly the deleted rows are deleted")
			}
		}
		bodiesKept()

		clock.Advance(60 * 24 * time.Hour)
		n, err = q.Cleanup(ctx, Retention{Batch: 2, Pause: time.Millisecond}, nil)
		require.NoError(t, err)
		assert.EqualValues(t, 5, n, "4 sent rows, and the failed row now 91 days old")
		assert.Equal(t, 0, countRows(t, s.db, q.table, "status = 2"))
		assert.Equal(t, 1, countRows(t, s.db, q.table, "id = ?", ids[3]), "a failed row of 60 days is kept")
		bodiesKept()

		counts, err := countByStatus(ctx, q)
		require.NoError(t, err)
		assert.Equal(t, map[string]int64{"sending": 2, "retry": 1, "failed": 1}, counts)
	})
}

func TestSendNow(t *testing.T) {
	ok := newFuncTransport(nil)
	r, err := SendNow(context.Background(), ok, testMessage("a@example.com"))
	require.NoError(t, err)
	assert.NotEmpty(t, r.MessageID)

	_, err = SendNow(context.Background(), ok, testMessage("not an address"))
	assert.ErrorIs(t, err, transport.ErrInvalidMessage)
	assert.EqualValues(t, 1, ok.total.Load(), "an invalid message is not sent")

	var deadline, called time.Time
	hang := newFuncTransport(func(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
		called = time.Now()
		deadline, _ = ctx.Deadline()
		<-ctx.Done()
		return transport.Receipt{}, &transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane, Detail: "timeout", Err: ctx.Err()}
	})
	// Each deadline is checked against the times read just before and
	// after it was set, not against a tolerance a loaded machine could
	// exceed.
	within := func(d time.Duration, before, after time.Time, msg string) {
		t.Helper()
		assert.False(t, deadline.Before(before.Add(d)) || deadline.After(after.Add(d)),
			"%s: deadline %v not within [%v, %v]", msg, deadline, before.Add(d), after.Add(d))
	}
	before := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	after := time.Now()
	defer cancel()
	_, err = SendNow(ctx, hang, testMessage("a@example.com"))
	assert.Equal(t, transport.Connection, transport.KindOf(err))
	assert.True(t, errors.Is(err, context.DeadlineExceeded))
	within(200*time.Millisecond, before, after, "a shorter caller deadline wins")

	before = time.Now()
	_, _ = SendNow(context.Background(), hang, testMessage("a@example.com"))
	within(SendNowTimeout, before, called, "3s by default") // SendNow sets it before it sends
}

func TestStatsOldestDue(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, clock)
		ids := enqueueN(t, q, 3)
		now := clock.Now()
		set := func(id int64, status int, nextRun time.Time) {
			_, err := s.db.Exec(rebindFor(t, s.db, `UPDATE `+q.table+` SET status = ?, next_run = ? WHERE id = ?`), status, nextRun.UnixMilli(), id)
			require.NoError(t, err)
		}
		set(ids[0], StatusPending, now.Add(-3*time.Minute))
		set(ids[1], StatusRetry, now.Add(-7*time.Minute))
		set(ids[2], StatusRetry, now.Add(time.Hour)) // not due: not overdue
		st, err := q.Stats(ctx)
		require.NoError(t, err)
		assert.Equal(t, 7*time.Minute, st.OldestDue, "the most overdue of pending and retry")

		set(ids[1], StatusSent, now)
		set(ids[0], StatusPending, now.Add(time.Minute))
		st, err = q.Stats(ctx)
		require.NoError(t, err)
		assert.Zero(t, st.OldestDue, "nothing due")
	})
}

// countByStatus counts every row by status name, leaving out empty ones.
func countByStatus(ctx context.Context, q *Queue) (map[string]int64, error) {
	counts := map[string]int64{}
	for s := StatusPending; s <= StatusFailed; s++ {
		n, err := q.Count(ctx, Filter{Status: StatusName(s)})
		if err != nil {
			return nil, err
		}
		if n > 0 {
			counts[StatusName(s)] = n
		}
	}
	return counts, nil
}

package queue

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestZeroLaneHasNoLimits: limits are opt-in; the zero Lane queues any
// number of mails for one recipient and one client IP.
func TestZeroLaneHasNoLimits(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		q := newQueue(t, s.db, Lane{}, nil)
		assert.Equal(t, Limit{}, q.lane.RecipientLimit)
		assert.Equal(t, Limit{}, q.lane.IPLimit)
		for range 25 {
			_, err := q.Enqueue(ctx, s.db, testMessage("ann@example.com"), ClientIP("192.0.2.7"))
			require.NoError(t, err)
		}
		assert.Equal(t, 0, countRows(t, s.db, q.limits, "1=1"), "no counters without limits")
	})
}

// TestSignupPreset: the anti-abuse preset allows 3 mails per recipient per
// hour and 20 per client IP per day.
func TestSignupPreset(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		q := newQueue(t, s.db, Lane{RecipientLimit: SignupRecipientLimit, IPLimit: SignupIPLimit}, newManualClock())
		for range 3 {
			_, err := q.Enqueue(ctx, s.db, testMessage("ann@example.com"))
			require.NoError(t, err)
		}
		_, err := q.Enqueue(ctx, s.db, testMessage("ann@example.com"))
		var rl *RateLimitError
		require.ErrorAs(t, err, &rl)
		assert.Equal(t, "recipient", rl.Limit)
		for i := range 20 {
			_, err := q.Enqueue(ctx, s.db, testMessage(string(rune('a'+i))+"@example.com"), ClientIP("192.0.2.7"))
			require.NoError(t, err, "mail %d", i+1)
		}
		_, err = q.Enqueue(ctx, s.db, testMessage("zed@example.com"), ClientIP("192.0.2.7"))
		require.ErrorAs(t, err, &rl)
		assert.Equal(t, "client IP", rl.Limit)
	})
}

// TestRateLimitRetryAfterWithinWindow: the retry hint is never longer than
// the limit's window (1 per hour used to say "try again in 2h").
func TestRateLimitRetryAfterWithinWindow(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		q := newQueue(t, s.db, Lane{RecipientLimit: Limit{N: 1, Per: time.Hour}}, clock)
		_, err := q.Enqueue(ctx, s.db, testMessage("ann@example.com"))
		require.NoError(t, err)
		for _, step := range []time.Duration{0, time.Minute, 20 * time.Minute} {
			clock.Advance(step)
			_, err = q.Enqueue(ctx, s.db, testMessage("ann@example.com"))
			var rl *RateLimitError
			require.ErrorAs(t, err, &rl)
			assert.Positive(t, rl.RetryAfter)
			assert.LessOrEqual(t, rl.RetryAfter, time.Hour, "retry hint after %v", step)
		}
	})
}

// TestPartialLimitIsAnError: a Limit with N but no Per (or the reverse)
// used to disable the limit silently.
func TestPartialLimitIsAnError(t *testing.T) {
	db := newSQLiteStore(t).db
	for _, lane := range []Lane{
		{RecipientLimit: Limit{N: 10}},
		{RecipientLimit: Limit{Per: time.Hour}},
		{IPLimit: Limit{N: -1, Per: time.Hour}},
		{IPLimit: Limit{N: 5, Per: time.Millisecond}},
	} {
		_, err := New(context.Background(), db, lane, nil)
		require.Error(t, err, "%+v", lane)
		assert.Contains(t, err.Error(), "limit")
		assert.False(t, errors.Is(err, ErrRateLimited))
	}
}

// TestRateLimitWeighsThePreviousWindow: 12 minutes into a new window, the
// previous hour's 10 mails still count for 8 (the sliding window), so a
// limit of 10 lets only two more through, with the counts read back from
// the upsert itself or by a read after it (a caller's DBTX without
// QueryContext, and MySQL).
func TestRateLimitWeighsThePreviousWindow(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		for _, bare := range []bool{false, true} {
			clock := newManualClock()
			q := newQueue(t, s.db, Lane{RecipientLimit: Limit{N: 10, Per: time.Hour}, IPLimit: NoLimit}, clock)
			var exec DBTX = s.db
			if bare {
				exec = onlyDBTX{s.db}
			}
			addr := fmt.Sprintf("prev-%v@example.com", bare)
			for range 10 {
				_, err := q.Enqueue(ctx, exec, testMessage(addr))
				require.NoError(t, err)
			}
			_, err := q.Enqueue(ctx, exec, testMessage(addr))
			require.ErrorIs(t, err, ErrRateLimited, "bare DBTX %v: the window is full", bare)

			per := time.Hour.Milliseconds()
			now := clock.Now().UnixMilli()
			clock.Advance(time.Duration((now/per+1)*per+12*time.Minute.Milliseconds()-now) * time.Millisecond)
			for i := range 2 {
				_, err := q.Enqueue(ctx, exec, testMessage(addr))
				require.NoError(t, err, "bare DBTX %v: mail %d of the new window", bare, i+1)
			}
			_, err = q.Enqueue(ctx, exec, testMessage(addr))
			require.ErrorIs(t, err, ErrRateLimited, "bare DBTX %v: 10 x 0.8 + 3 > 10", bare)
		}
	})
}

// TestRateLimitAcrossSkewedClocks: an application host whose clock is an
// hour ahead moves the recipient's counter into its window first; a host
// still in the window before counts into the same counter rather than
// resetting it, so the two hosts together never pass the limit.
func TestRateLimitAcrossSkewedClocks(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		lane := Lane{RecipientLimit: Limit{N: 2, Per: time.Hour}, IPLimit: NoLimit}
		behind, ahead := newManualClock(), newManualClock()
		ahead.Advance(time.Hour)
		qBehind := newQueue(t, s.db, lane, behind)
		qAhead := newQueue(t, s.db, lane, ahead)
		_, err := qAhead.Enqueue(ctx, s.db, testMessage("skew@example.com"))
		require.NoError(t, err)
		_, err = qBehind.Enqueue(ctx, s.db, testMessage("skew@example.com"))
		require.NoError(t, err)
		for _, q := range []*Queue{qBehind, qAhead} {
			_, err = q.Enqueue(ctx, s.db, testMessage("skew@example.com"))
			require.ErrorIs(t, err, ErrRateLimited)
		}
	})
}

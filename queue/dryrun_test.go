package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDryRunsChangeNothing: WouldRetry, WouldCancel and CountOld answer
// what Retry, Cancel and Cleanup would do, with the same refusals, and
// leave every row as it was.
func TestDryRunsChangeNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		q, ids := seedOps(t, s, clock)
		before := listIDs(t, q, ListOptions{Filter: Filter{Status: "failed"}})

		n, err := q.WouldRetry(ctx, ids[1], ids[4], ids[0], 999)
		require.EqualValues(t, 2, n, "the two failed mails")
		require.ErrorIs(t, err, ErrWrongState, "the sent one")
		require.ErrorIs(t, err, ErrNotFound, "999")
		n, err = q.WouldCancel(ctx, ids[2], ids[5], ids[3])
		require.EqualValues(t, 2, n, "the retry and the pending mail")
		require.ErrorIs(t, err, ErrWrongState, "the mail being sent")

		// Sent 1 s and failed 2 s and 3 s before the clock.
		old, err := q.CountOld(ctx, Retention{Sent: 1500 * time.Millisecond, Failed: 2500 * time.Millisecond})
		require.NoError(t, err)
		require.EqualValues(t, 1, old, "only the failed mail finished 3 s ago")
		old, err = q.CountOld(ctx, Retention{Sent: time.Millisecond, Failed: time.Millisecond})
		require.NoError(t, err)
		require.EqualValues(t, 3, old)

		require.Equal(t, before, listIDs(t, q, ListOptions{Filter: Filter{Status: "failed"}}))
		for i, want := range []string{"sent", "failed", "retry", "sending", "failed", "pending"} {
			r, err := q.Row(ctx, ids[i])
			require.NoError(t, err)
			require.Equal(t, want, r.Status, "mail %d", ids[i])
		}
		deleted, err := q.Cleanup(ctx, Retention{Sent: time.Millisecond, Failed: time.Millisecond, Pause: time.Millisecond}, nil)
		require.NoError(t, err)
		require.Equal(t, old, deleted, "CountOld counts what Cleanup deletes")
	})
}

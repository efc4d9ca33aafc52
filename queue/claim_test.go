package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClaimTakesOnlyDueRows: a mail due in an hour (and a retry due in an
// hour) is not claimed before then, beside mail due now, and is claimed
// once due.
func TestClaimTakesOnlyDueRows(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, clock)
		later, err := q.Enqueue(ctx, s.db, testMessage("later@example.com"), Delay(time.Hour))
		require.NoError(t, err)
		now := enqueueN(t, q, 2)
		retry := enqueueN(t, q, 1)[0]
		_, err = s.db.ExecContext(ctx, rebindFor(t, s.db, `UPDATE `+q.table+` SET status = ?, attempts = 1, next_run = ? WHERE id = ?`),
			StatusRetry, clock.Now().Add(time.Hour).UnixMilli(), retry)
		require.NoError(t, err)

		jobs, err := q.claim(ctx, "w.1", 10, time.Minute, nil)
		require.NoError(t, err)
		assert.ElementsMatch(t, now, jobIDs(jobs), "only the mail due now")
		jobs, err = q.claim(ctx, "w.2", 10, time.Minute, nil)
		require.NoError(t, err)
		assert.Empty(t, jobs, "nothing else is due")

		clock.Advance(time.Hour - time.Millisecond)
		jobs, err = q.claim(ctx, "w.3", 10, time.Minute, nil)
		require.NoError(t, err)
		assert.Empty(t, jobs, "a millisecond early")

		clock.Advance(time.Millisecond)
		jobs, err = q.claim(ctx, "w.4", 10, time.Minute, nil)
		require.NoError(t, err)
		assert.Equal(t, []int64{later, retry}, jobIDs(jobs), "due now: pending first, then retry")
	})
}

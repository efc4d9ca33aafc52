package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFailuresByRule(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		q, ids := seedOps(t, s, clock) // 2 and 5 failed, 1 sent
		now := clock.Now()
		setRule := func(id int64, rule string) {
			t.Helper()
			_, err := s.db.Exec(rebindFor(t, s.db, `UPDATE `+q.table+` SET last_rule = ? WHERE id = ?`), rule, id)
			require.NoError(t, err)
		}
		setRule(ids[1], "smtp-5.1.1")
		setRule(ids[4], "retries-exhausted")
		_, err := q.Cancel(ctx, ids[5]) // cancelled: its own group, no rule
		require.NoError(t, err)
		// An old failure of the same rule, outside the window.
		id, err := q.Enqueue(ctx, s.db, testMessage("old@example.com"))
		require.NoError(t, err)
		_, err = s.db.Exec(rebindFor(t, s.db, `UPDATE `+q.table+` SET status = ?, last_kind = 'permanent', last_rule = 'smtp-5.1.1', next_run = ? WHERE id = ?`),
			StatusFailed, now.Add(-48*time.Hour).UnixMilli(), id)
		require.NoError(t, err)
		// Another failure of smtp-5.1.1 in the window: that rule leads.
		id2, err := q.Enqueue(ctx, s.db, testMessage("eve@example.com"))
		require.NoError(t, err)
		_, err = s.db.Exec(rebindFor(t, s.db, `UPDATE `+q.table+` SET status = ?, last_kind = 'permanent', last_rule = 'smtp-5.1.1', next_run = ? WHERE id = ?`),
			StatusFailed, now.Add(-time.Hour).UnixMilli(), id2)
		require.NoError(t, err)

		got, err := q.FailuresByRule(ctx, now.Add(-24*time.Hour))
		require.NoError(t, err)
		require.Len(t, got, 3)
		assert.Equal(t, RuleFailures{Rule: "smtp-5.1.1", Kind: "permanent", Count: 2, Last: time.UnixMilli(now.UnixMilli() - 2000)}, got[0])
		assert.ElementsMatch(t, []string{"retries-exhausted/temporary", "/cancelled"},
			[]string{got[1].Rule + "/" + got[1].Kind, got[2].Rule + "/" + got[2].Kind})

		rows, err := q.FailedBy(ctx, "smtp-5.1.1", "permanent", now.Add(-24*time.Hour), 10)
		require.NoError(t, err)
		require.Len(t, rows, 2)
		assert.Equal(t, []int64{ids[1], id2}, []int64{rows[0].ID, rows[1].ID}, "most recently failed first, the old one left out")
		rows, err = q.FailedBy(ctx, "", "cancelled", now.Add(-24*time.Hour), 10)
		require.NoError(t, err)
		require.Len(t, rows, 1)
		assert.Equal(t, ids[5], rows[0].ID)
		_, err = q.FailedBy(ctx, "x", "permanent", now, 0)
		assert.ErrorContains(t, err, "limit 0 out of range")
	})
}

package queue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCursorStillClaimsRowsBehindIt: a claimer's picks start where its last
// one ended, but a row that becomes due behind that point (here: a
// producer's transaction that committed after later rows were claimed) is
// claimed as soon as a pick comes back short, and within fullPickEvery
// even while the backlog ahead of the cursor keeps every pick full.
func TestCursorStillClaimsRowsBehindIt(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, clock)
		ids := enqueueN(t, q, 12)
		var cur cursor
		claimIDs := func(n int) []int64 { t.Helper(); return claimedIDs(t, q, n, &cur) }
		assert.Equal(t, ids[:3], claimIDs(3))

		// A row due before the cursor's position: the next full pick is
		// still served from the cursor on.
		late := ids[11]
		_, err := s.db.ExecContext(ctx, rebindFor(t, s.db, `UPDATE `+q.table+` SET next_run = ? WHERE id = ?`), q.now()-1, late)
		require.NoError(t, err)
		assert.Equal(t, ids[3:6], claimIDs(3), "picks go on from the cursor")

		// Once fullPickEvery has passed, a pick starts at the front again.
		clock.Advance(fullPickEvery)
		assert.Equal(t, []int64{late, ids[6], ids[7]}, claimIDs(3), "the row behind the cursor first")

		// A short pick from the cursor also looks at the front.
		_, err = s.db.ExecContext(ctx, rebindFor(t, s.db, `UPDATE `+q.table+` SET next_run = ? WHERE id = ?`), q.now()-1, ids[10])
		require.NoError(t, err)
		assert.ElementsMatch(t, []int64{ids[8], ids[9], ids[10]}, claimIDs(5), "a short pick takes the rest, wherever it is due")
		assert.Empty(t, claimIDs(5))
	})
}

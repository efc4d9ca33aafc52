package queue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSentRowShowsEarlierFailureAsHistory: a send leaves the failure
// columns of an earlier attempt in place; Row must not show them as the
// mail's last outcome, only as an earlier failure.
func TestSentRowShowsEarlierFailureAsHistory(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
		ids := enqueueN(t, q, 2)
		// As a 421 and then a send leave a row.
		_, err := s.db.ExecContext(ctx, rebindFor(t, s.db, `UPDATE `+q.table+` SET status = ?, last_kind = 'sent', last_code = 421, last_rule = 'smtp-4xx', last_scope = 'transient', last_error = 'try later' WHERE id = ?`), StatusSent, ids[0])
		require.NoError(t, err)
		r, err := q.Row(ctx, ids[0])
		require.NoError(t, err)
		assert.Equal(t, "sent", r.LastKind)
		assert.Zero(t, r.LastCode)
		assert.Empty(t, r.LastRule)
		assert.Empty(t, r.LastScope)
		assert.Empty(t, r.LastError)
		assert.Equal(t, &EarlierFailure{Code: 421, Rule: "smtp-4xx", Scope: "transient", Error: "try later"}, r.EarlierFailure)

		// A failure that is the last outcome stays one.
		_, err = s.db.ExecContext(ctx, rebindFor(t, s.db, `UPDATE `+q.table+` SET status = ?, last_kind = 'temporary', last_code = 421, last_error = 'try later' WHERE id = ?`), StatusRetry, ids[1])
		require.NoError(t, err)
		r, err = q.Row(ctx, ids[1])
		require.NoError(t, err)
		assert.Equal(t, 421, r.LastCode)
		assert.Equal(t, "try later", r.LastError)
		assert.Nil(t, r.EarlierFailure)
	})
}

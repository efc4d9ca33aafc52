package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResumeDeferredAfterAnOutage(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, clock)
		ids := enqueueN(t, q, 1203)
		now := clock.Now()
		set := func(where string, status int, kind string, nextRun time.Time, args ...any) {
			_, err := s.db.Exec(rebindFor(t, s.db, `UPDATE `+q.table+` SET status = ?, last_kind = ?, next_run = ? WHERE `+where),
				append([]any{status, kind, nextRun.UnixMilli()}, args...)...)
			require.NoError(t, err)
		}
		// 1 200 mails put off by the outage, all with the same next_run (more
		// than one batch), and three that must not move.
		set("id > ?", StatusRetry, "connection", now.Add(time.Hour), ids[2])
		set("id = ?", StatusRetry, "temporary", now.Add(time.Hour), ids[0])     // a 4xx: its schedule stands
		set("id = ?", StatusRetry, "connection", now.Add(-time.Minute), ids[1]) // already due
		set("id = ?", StatusSending, "connection", now.Add(time.Hour), ids[2])  // leased

		n, err := q.resumeDeferred(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 1200, n)
		assert.Equal(t, 1200, countRows(t, s.db, q.table, "status = 3 AND next_run = ?", now.UnixMilli()))
		assert.Equal(t, now.Add(time.Hour).UnixMilli(), readRow(t, q, ids[0]).NextRun)
		assert.Equal(t, now.Add(-time.Minute).UnixMilli(), readRow(t, q, ids[1]).NextRun)
		assert.Equal(t, now.Add(time.Hour).UnixMilli(), readRow(t, q, ids[2]).NextRun)
	})
}

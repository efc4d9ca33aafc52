package queue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUrgentMailOvertakesABulkBacklog: a password reset enqueued with a
// high priority behind 131 072 bulk mails of the same lane, on every store,
// while a claimer is draining them from its cursor, is the first row of the
// very next claim; a mail of a lower priority than the bulk waits for all
// of it. (On SQLite the copies take about 45 s under the race detector on
// a loaded machine: the promise is about 100 000 mails on every store.)
func TestUrgentMailOvertakesABulkBacklog(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
		enqueueN(t, q, 1)
		cols := `status, nice, body_id, ` + copyColumns
		if !q.d.sqlite {
			cols = `status, nice, ` + copyColumns
		}
		for range 17 { // 131 072 bulk mails at the default priority
			_, err := s.db.ExecContext(ctx, `INSERT INTO `+q.table+` (`+cols+`) SELECT `+cols+` FROM `+q.table)
			require.NoError(t, err)
		}
		var cur cursor
		claimedIDs(t, q, 50, &cur)
		claimedIDs(t, q, 50, &cur)
		require.NotEmpty(t, cur.at, "the claimer drains the backlog from its cursor")

		low, err := q.Enqueue(ctx, s.db, testMessage("newsletter@example.com"), Priority(MinPriority))
		require.NoError(t, err)
		reset, err := q.Enqueue(ctx, s.db, testMessage("reset@example.com"), Priority(MaxPriority))
		require.NoError(t, err)
		soon, err := q.Enqueue(ctx, s.db, testMessage("receipt@example.com"), Priority(DefaultPriority+1))
		require.NoError(t, err)

		next := claimedIDs(t, q, 50, &cur)
		require.Len(t, next, 50)
		assert.Equal(t, []int64{reset, soon}, next[:2], "highest priority first, at the next claim")
		assert.NotContains(t, next, low, "the lowest priority waits behind the bulk")

		jobs, err := q.claim(ctx, "w.1", 1, 0, nil)
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		assert.Equal(t, int64(MaxPriority-DefaultPriority), jobs[0].nice, "the bulk, at the default priority")
	})
}

// TestSQLitePickStaysOnTheClaimIndex: on SQLite the claim's pick, from the
// front and from a cursor, reads the (status, nice, next_run, id) index in
// its order: no sort of the due rows.
func TestSQLitePickStaysOnTheClaimIndex(t *testing.T) {
	t.Parallel()
	s := newSQLiteStore(t)
	q := newQueue(t, s.db, Lane{}, nil)
	enqueueN(t, q, 3)
	_, err := s.db.Exec(`ANALYZE`)
	require.NoError(t, err)
	for _, after := range []bool{false, true} {
		args := dueArgs(StatusPending, q.now(), nil)
		if after {
			args = dueArgs(StatusPending, q.now(), &dueKey{nice: 4, nextRun: q.now(), id: 1})
		}
		rows, err := s.db.Query(`EXPLAIN QUERY PLAN `+q.pickSelect(after), append(args, 50)...)
		require.NoError(t, err)
		var plan string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &notused, &detail))
			plan += detail + "\n"
		}
		require.NoError(t, rows.Err())
		assert.Contains(t, plan, "mail_queue_idx_claim (status=? AND nice=? AND next_run<?)", "after %v: %s", after, plan)
		assert.NotContains(t, plan, "TEMP B-TREE", "after %v: no sort: %s", after, plan)
	}
}

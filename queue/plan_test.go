package queue

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPickQueryStaysOnTheIndex builds a large history of sent and failed
// rows plus a due backlog and a deferred retry backlog on MariaDB, then asks
// the server how it runs the claim's pick: its plain read must read the
// (status, next_run, id) index range alone and touch about LIMIT rows, not
// walk the primary key through the history (what a naive "status IN (0,3)
// ORDER BY id" pick does), and its locking read must read just the rows it
// names, by primary key.
func TestPickQueryStaysOnTheIndex(t *testing.T) {
	t.Parallel()
	s := newMariaDBStore(t)
	ctx := context.Background()
	q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
	now := time.Now()
	enqueueN(t, q, 1)
	// Double the table 17 times: 131 072 rows.
	cols := `status, ` + copyColumns
	for range 17 {
		_, err := s.db.ExecContext(ctx, `INSERT INTO `+q.table+` (`+cols+`) SELECT `+cols+` FROM `+q.table)
		require.NoError(t, err)
	}
	// History: everything sent or failed over the last 30 days; then a due
	// pending backlog of 5 000 and 20 000 retries deferred into the future.
	day := int64(24 * time.Hour / time.Millisecond)
	_, err := s.db.ExecContext(ctx, `UPDATE `+q.table+` SET status = IF(id % 10 = 0, 4, 2), next_run = ? - (id * 7919) % (30 * ?)`, now.UnixMilli(), day)
	require.NoError(t, err)
	_, err = s.db.ExecContext(ctx, `UPDATE `+q.table+` SET status = 0, next_run = ? - id, nice = id % 3 WHERE id <= 5000`, now.UnixMilli())
	require.NoError(t, err)
	_, err = s.db.ExecContext(ctx, `UPDATE `+q.table+` SET status = 3, next_run = ? + id WHERE id > 5000 AND id <= 25000`, now.Add(time.Hour).UnixMilli())
	require.NoError(t, err)
	_, err = s.db.ExecContext(ctx, `ANALYZE TABLE `+q.table)
	require.NoError(t, err)

	// The pick from the start of a status, and from a cursor (after the
	// 1 000th due row of the pending backlog).
	type pick struct {
		status int
		after  bool
	}
	for _, pk := range []pick{{StatusPending, false}, {StatusRetry, false}, {StatusSending, false}, {StatusPending, true}} {
		status := pk.status
		args := []any{status, now.UnixMilli()}
		f := fromFront
		if pk.after {
			var at dueKey
			require.NoError(t, s.db.QueryRowContext(ctx, `SELECT nice, next_run, id FROM `+q.table+` WHERE status = 0 ORDER BY nice, next_run, id LIMIT 1 OFFSET 999`).Scan(&at.nice, &at.nextRun, &at.id))
			args = dueArgs(status, now.UnixMilli(), &at)
			f = fromCursor
		}
		require.True(t, q.d.skipLocked, "MariaDB 10.6+ has SKIP LOCKED")
		tbl, plan := analyze(t, s.db, q.dueKeysSelect(f), append(args, 50)...)
		assert.Equal(t, "idx_claim", tbl.Key, "status %d: %s", status, plan)
		assert.Contains(t, []string{"range", "ref"}, tbl.AccessType, "status %d: an index lookup, not a scan", status)
		assert.True(t, tbl.UsingIndex, "status %d: answered from the index alone: %s", status, plan)
		// r_rows: the server reads at most one entry past LIMIT's (51 was
		// measured for the pending pick from the start).
		assert.LessOrEqual(t, tbl.RRows, 51.0, "status %d reads about LIMIT rows", status)
		assert.NotContains(t, strings.ToLower(plan), "filesort", "status %d: no sort", status)
	}

	// The locking read of 50 picked rows reads those rows by primary key.
	rows, err := s.db.QueryContext(ctx, q.dueKeysSelect(fromFront), StatusPending, now.UnixMilli(), 50)
	require.NoError(t, err)
	var args []any
	for rows.Next() {
		var k dueKey
		require.NoError(t, rows.Scan(&k.nice, &k.nextRun, &k.id))
		args = append(args, k.id)
	}
	require.NoError(t, rows.Err())
	require.Len(t, args, 50)
	tbl, plan := analyze(t, s.db, q.lockDueSelect(len(args)), append(args, now.UnixMilli())...)
	assert.Equal(t, "PRIMARY", tbl.Key, plan)
	assert.Equal(t, "range", tbl.AccessType, plan)
	assert.LessOrEqual(t, tbl.RRows, 50.0, "reads the rows it names: %s", plan)

	// The monitoring counts are index ranges too.
	for _, where := range []string{"status = 0", "status = 2 AND next_run > ?", "status = 4 AND next_run > ?", "status = 1 AND next_run < ?"} {
		var id, selectType, table, typ string
		var possible, key, keyLen, ref, extra sql.NullString
		var rows sql.NullInt64
		args := []any{}
		if strings.Contains(where, "?") {
			args = append(args, now.Add(-time.Hour).UnixMilli())
		}
		require.NoError(t, s.db.QueryRowContext(ctx, `EXPLAIN SELECT COUNT(*) FROM `+q.table+` WHERE `+where, args...).
			Scan(&id, &selectType, &table, &typ, &possible, &key, &keyLen, &ref, &rows, &extra))
		assert.Contains(t, []string{"idx_pick", "idx_claim"}, key.String, where)
		assert.Contains(t, []string{"range", "ref"}, typ, where)
		assert.Contains(t, extra.String, "Using index", "%s: answered from the index alone", where)
	}
}

type planTable struct {
	AccessType string  `json:"access_type"`
	Key        string  `json:"key"`
	RRows      float64 `json:"r_rows"`
	UsingIndex bool    `json:"using_index"`
}

// analyze runs query under MariaDB's ANALYZE and returns how it read its
// one table, and the whole plan.
func analyze(t *testing.T, db *sql.DB, query string, args ...any) (planTable, string) {
	t.Helper()
	var plan string
	require.NoError(t, db.QueryRowContext(context.Background(), `ANALYZE FORMAT=JSON `+query, args...).Scan(&plan))
	var p struct {
		QueryBlock struct {
			NestedLoop []struct {
				Table planTable `json:"table"`
			} `json:"nested_loop"`
		} `json:"query_block"`
	}
	require.NoError(t, json.Unmarshal([]byte(plan), &p), plan)
	require.Len(t, p.QueryBlock.NestedLoop, 1, plan)
	return p.QueryBlock.NestedLoop[0].Table, plan
}

// TestCompletionIsBoundedOnTheServer holds a row lock in another
// transaction and checks that a completion gives up after the server-side
// bound instead of waiting the server's default 50 s with no client timeout.
func TestCompletionIsBoundedOnTheServer(t *testing.T) {
	t.Parallel()
	s := newMariaDBStore(t)
	ctx := context.Background()
	q := newQueue(t, s.db, Lane{}, nil)
	id := enqueueN(t, q, 1)[0]
	jobs, err := q.claim(ctx, "w.1", 1, time.Minute, nil)
	require.NoError(t, err)
	require.Len(t, jobs, 1)

	blocker, err := s.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer blocker.Rollback() //nolint:errcheck
	_, err = blocker.ExecContext(ctx, `UPDATE `+q.table+` SET template = 'locked' WHERE id = ?`, id)
	require.NoError(t, err)

	// The client gives the statement five times the queue's bound, and
	// the server's own default lock wait (innodb_lock_wait_timeout, 50 s)
	// is longer than that: only the statement's own bound ends the wait
	// with the server's error before the context ends it.
	cctx, cancel := context.WithTimeout(ctx, 5*statementTimeout)
	defer cancel()
	_, err = q.complete(cctx, "w.1", []rowUpdate{{id: id, status: StatusSent, attempts: 1, lastKind: "sent"}})
	require.Error(t, err)
	assert.Regexp(t, "Lock wait timeout|max_statement_time exceeded", err.Error(), "bounded by the statement's own lock wait limit")
	assert.NoError(t, cctx.Err(), "the server ended the wait, not the client")
}

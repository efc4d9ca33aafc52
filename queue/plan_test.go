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
// the server how it runs the claim's pick query: it must read the
// (status, next_run, id) index range and touch about LIMIT rows, not walk
// the primary key through the history (what a naive "status IN (0,3)
// ORDER BY id" pick does).
func TestPickQueryStaysOnTheIndex(t *testing.T) {
	t.Parallel()
	s := newMariaDBStore(t)
	ctx := context.Background()
	q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
	now := time.Now()
	enqueueN(t, q, 1)
	// Double the table 17 times: 131 072 rows.
	cols := `status, attempts, max_attempts, next_run, not_after, created_at, message_id, template, client_ip,
  from_addr, from_name, to_addr, to_name, reply_to_addr, reply_to_name, subject, text_body, html_body, headers`
	for range 17 {
		_, err := s.db.ExecContext(ctx, `INSERT INTO `+q.table+` (`+cols+`) SELECT `+cols+` FROM `+q.table)
		require.NoError(t, err)
	}
	// History: everything sent or failed over the last 30 days; then a due
	// pending backlog of 5 000 and 20 000 retries deferred into the future.
	day := int64(24 * time.Hour / time.Millisecond)
	_, err := s.db.ExecContext(ctx, `UPDATE `+q.table+` SET status = IF(id % 10 = 0, 4, 2), next_run = ? - (id * 7919) % (30 * ?)`, now.UnixMilli(), day)
	require.NoError(t, err)
	_, err = s.db.ExecContext(ctx, `UPDATE `+q.table+` SET status = 0, next_run = ? - id WHERE id <= 5000`, now.UnixMilli())
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
		if pk.after {
			var from dueKey
			require.NoError(t, s.db.QueryRowContext(ctx, `SELECT next_run, id FROM `+q.table+` WHERE status = 0 ORDER BY next_run, id LIMIT 1 OFFSET 999`).Scan(&from.nextRun, &from.id))
			args = append(args, from.nextRun, from.nextRun, from.id)
		}
		var plan string
		require.NoError(t, s.db.QueryRowContext(ctx, `ANALYZE FORMAT=JSON `+q.pickSelect(pk.after), append(args, 50)...).Scan(&plan))
		var p struct {
			QueryBlock struct {
				NestedLoop []struct {
					Table struct {
						AccessType string  `json:"access_type"`
						Key        string  `json:"key"`
						RRows      float64 `json:"r_rows"`
					} `json:"table"`
				} `json:"nested_loop"`
			} `json:"query_block"`
		}
		require.NoError(t, json.Unmarshal([]byte(plan), &p), plan)
		require.Len(t, p.QueryBlock.NestedLoop, 1, plan)
		tbl := p.QueryBlock.NestedLoop[0].Table
		assert.Equal(t, "idx_pick", tbl.Key, "status %d: %s", status, plan)
		assert.Contains(t, []string{"range", "ref"}, tbl.AccessType, "status %d: an index lookup, not a scan", status)
		assert.LessOrEqual(t, tbl.RRows, 50.0, "status %d reads at most LIMIT rows", status)
		assert.NotContains(t, strings.ToLower(plan), "filesort", "status %d: no sort", status)
	}

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
		assert.Equal(t, "idx_pick", key.String, where)
		assert.Contains(t, []string{"range", "ref"}, typ, where)
		assert.Contains(t, extra.String, "Using index", "%s: answered from the index alone", where)
	}
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

	start := time.Now()
	_, err = q.complete(ctx, "w.1", []rowUpdate{{id: id, status: StatusSent, attempts: 1, lastKind: "sent"}})
	require.Error(t, err)
	assert.Regexp(t, "Lock wait timeout|max_statement_time exceeded", err.Error())
	assert.Less(t, time.Since(start), 20*time.Second, "bounded by the statement's own lock wait limit")
}

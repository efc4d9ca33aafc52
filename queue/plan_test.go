package queue

import (
	"context"
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
// the primary key through the history (what the article's query does).
func TestPickQueryStaysOnTheIndex(t *testing.T) {
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

	pick := `SELECT ` + claimColumns + ` FROM ` + q.table + ` WHERE status = ? AND next_run <= ? ORDER BY next_run, id LIMIT 50`
	for _, status := range []int{StatusPending, StatusRetry, StatusSending} {
		var plan string
		require.NoError(t, s.db.QueryRowContext(ctx, `ANALYZE FORMAT=JSON `+pick, status, now.UnixMilli()).Scan(&plan))
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
}

package queue

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLookupByMessageAndProviderID: List finds a mail by its Message-ID
// header and by its provider's id (bracketed or not), and each store's
// planner reads it through the lane's own index, not a scan of the table.
func TestLookupByMessageAndProviderID(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
		ids := enqueueN(t, q, 20)
		for i, id := range ids {
			_, err := s.db.ExecContext(ctx, rebindFor(t, s.db, `UPDATE `+q.table+` SET provider_id = ? WHERE id = ?`), fmt.Sprintf("<prov-%d@relay.example>", i), id)
			require.NoError(t, err)
		}
		want, err := q.Row(ctx, ids[7])
		require.NoError(t, err)

		for _, f := range []Filter{{MessageID: want.MessageID}, {MessageID: "<" + want.MessageID + ">"},
			{ProviderID: "prov-7@relay.example"}, {ProviderID: "<prov-7@relay.example>"}} {
			rows, err := q.List(ctx, ListOptions{Filter: f})
			require.NoError(t, err)
			require.Len(t, rows, 1, "%+v", f)
			assert.Equal(t, ids[7], rows[0].ID)
		}

		for _, c := range []struct {
			f     Filter
			index string
		}{{Filter{MessageID: want.MessageID}, "idx_message_id"}, {Filter{ProviderID: "prov-7@relay.example"}, "idx_provider_id"}} {
			query, args, err := q.listQuery(ListOptions{Filter: c.f, Limit: 50})
			require.NoError(t, err)
			plan := explain(t, s, query, args...)
			assert.Contains(t, plan, c.index, "the lookup reads the index: %s", plan)
		}
	})
}

// explain returns the store's plan for query, as text. PostgreSQL is told
// not to scan the table where it has a choice: on 20 rows a scan is
// cheaper, and the question is whether the query's shape can use the index.
func explain(t *testing.T, s store, query string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	switch s.name {
	case "sqlite":
		rows, err := s.db.QueryContext(ctx, `EXPLAIN QUERY PLAN `+query, args...)
		require.NoError(t, err)
		defer rows.Close()
		var b strings.Builder
		for rows.Next() {
			var id, parent, unused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
			b.WriteString(detail + "\n")
		}
		require.NoError(t, rows.Err())
		return b.String()
	case "postgres":
		tx, err := s.db.BeginTx(ctx, nil)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback() }()
		_, err = tx.ExecContext(ctx, `SET LOCAL enable_seqscan = off`)
		require.NoError(t, err)
		var plan string
		require.NoError(t, tx.QueryRowContext(ctx, `EXPLAIN (FORMAT JSON) `+rebindFor(t, s.db, query), args...).Scan(&plan))
		return plan
	default:
		var plan string
		require.NoError(t, s.db.QueryRowContext(ctx, `EXPLAIN FORMAT=JSON `+query, args...).Scan(&plan))
		assert.NotContains(t, plan, `"access_type": "ALL"`, "no table scan")
		return plan
	}
}

package queue

// The queue's tests open SQLite through dburl, which leaves linking the
// driver to the program.
import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"
)

// TestSQLiteURLSettings: a database opened from a sqlite: URL runs with
// the settings the queue counts on, on every connection of the pool: WAL
// (readers beside the writer), a busy timeout and synchronous=NORMAL (safe
// with WAL).
func TestSQLiteURLSettings(t *testing.T) {
	t.Parallel()
	s := newSQLiteStore(t)
	ctx := context.Background()
	want := map[string]string{"journal_mode": "wal", "busy_timeout": "10000", "synchronous": "1"}
	conns := make([]*sql.Conn, 3) // three connections of the pool at once
	for i := range conns {
		c, err := s.db.Conn(ctx)
		require.NoError(t, err)
		defer c.Close()
		conns[i] = c
	}
	for i, c := range conns {
		for pragma, v := range want {
			var got string
			require.NoError(t, c.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got))
			assert.Equal(t, v, got, "connection %d: PRAGMA %s", i, pragma)
		}
	}
}

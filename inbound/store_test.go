package inbound

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/queue/dburl/dburltest"
	"github.com/mailspool/mailspool/suppress"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "modernc.org/sqlite"
)

// store is one database a test runs on.
type store struct {
	name string
	url  string
	db   *sql.DB
}

// forEachStore runs f on a fresh SQLite file, MariaDB database and
// PostgreSQL database, each migrated (queue, suppression list, events).
// Under CI=true an unreachable server fails the test; elsewhere its part is
// skipped with a line saying how to start it.
func forEachStore(t *testing.T, f func(t *testing.T, s store)) {
	dburltest.Each(t, func(t *testing.T, name, u string) { f(t, openMigrated(t, name, u)) })
}

func openMigrated(t testing.TB, name, u string) store {
	t.Helper()
	db, err := dburl.Open(u)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	require.NoError(t, queue.Migrate(context.Background(), db))
	require.NoError(t, suppress.Migrate(context.Background(), db))
	require.NoError(t, Migrate(context.Background(), db))
	return store{name: name, url: u, db: db}
}

func newSQLite(t testing.TB) store {
	t.Helper()
	return openMigrated(t, "sqlite", "sqlite:"+filepath.Join(t.TempDir(), "q.db"))
}

// A lane's table may not be the events table.
func TestTableIsOwned(t *testing.T) {
	assert.Contains(t, queue.OwnTables, Table)
}

// An events table made before events were linked on arrival gains the
// link's columns and index when migrated again, and keeps its rows.
func TestMigrateAddsTheLink(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		d, err := dialectOf(s.db)
		require.NoError(t, err)
		_, err = s.db.Exec(`DROP TABLE ` + Table)
		require.NoError(t, err)
		old := d.createSQL()[0]
		for _, cut := range []string{
			"  lane            VARCHAR(64) CHARACTER SET ascii NOT NULL DEFAULT '' COMMENT 'the lane of the mail it is about, linked when it arrived',\n",
			"  mail_id         BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'that mail''s id in its lane; 0 = not linked',\n",
			",\n  KEY idx_lane (lane, type, received_at),\n  KEY idx_lane_received (lane, received_at)",
			"  lane            VARCHAR(64) NOT NULL DEFAULT '',\n", "  mail_id         BIGINT NOT NULL DEFAULT 0,\n",
			"  lane            TEXT NOT NULL DEFAULT '',\n", "  mail_id         INTEGER NOT NULL DEFAULT 0,\n",
		} {
			old = strings.Replace(old, cut, "", 1)
		}
		require.NotContains(t, old, "mail_id")
		_, err = s.db.Exec(old)
		require.NoError(t, err)
		_, err = s.db.Exec(d.Rebind(`INSERT INTO `+Table+` (provider, event_id, type, recipient, occurred_at, received_at) VALUES (?, ?, ?, ?, ?, ?)`), SES, "old", Delivered, "a@example.com", 1, 1)
		require.NoError(t, err)

		require.NoError(t, Migrate(ctx, s.db))
		require.NoError(t, Migrate(ctx, s.db), "again: nothing to do")
		st, err := OpenStore(s.db)
		require.NoError(t, err)
		evs, err := st.Recent(ctx, "", 5)
		require.NoError(t, err)
		require.Len(t, evs, 1)
		assert.Equal(t, "old", evs[0].EventID)
		n, err := st.CountLane(ctx, "", Delivered, time.UnixMilli(0))
		require.NoError(t, err)
		assert.EqualValues(t, 1, n, "an old event is unlinked")
	})
}

package suppress

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/queue/dburl/dburltest"
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
	require.NoError(t, Migrate(context.Background(), db))
	return store{name: name, url: u, db: db}
}

func newSQLite(t testing.TB) store {
	t.Helper()
	return openMigrated(t, "sqlite", "sqlite:"+filepath.Join(t.TempDir(), "q.db"))
}

func newMariaDB(t testing.TB) store {
	t.Helper()
	return openMigrated(t, "mariadb", dburltest.MariaDB.Fresh(t))
}

func newPostgres(t testing.TB) store {
	t.Helper()
	return openMigrated(t, "postgres", dburltest.Postgres.Fresh(t))
}
func openList(t *testing.T, s store) *List {
	t.Helper()
	l, err := Open(s.db)
	require.NoError(t, err)
	return l
}

// A lane's table may not be the suppression list's.
func TestTableIsOwned(t *testing.T) {
	assert.Contains(t, queue.OwnTables, Table)
	err := queue.Lane{Name: "x", Table: Table}.Validate()
	assert.ErrorContains(t, err, "one of mailspool's own tables")
}

func TestCheckSchema(t *testing.T) {
	ctx := context.Background()
	db, err := dburl.Open("sqlite:" + filepath.Join(t.TempDir(), "q.db"))
	require.NoError(t, err)
	defer db.Close()
	err = CheckSchema(ctx, db)
	assert.ErrorContains(t, err, "run 'mailspool migrate'")
	require.NoError(t, Migrate(ctx, db))
	assert.NoError(t, CheckSchema(ctx, db))
}

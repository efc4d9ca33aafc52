package suppress

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/require"

	_ "modernc.org/sqlite"
)

// store is one database a test runs on.
type store struct {
	name string
	url  string
	db   *sql.DB
}

// forEachStore runs f on a fresh SQLite file and a fresh MariaDB database,
// both migrated (queue and suppression list). Under CI=true an unreachable
// MariaDB fails the test; elsewhere its half is skipped with a line saying
// how to start it.
func forEachStore(t *testing.T, f func(t *testing.T, s store)) {
	t.Run("sqlite", func(t *testing.T) { f(t, newSQLite(t)) })
	t.Run("mariadb", func(t *testing.T) { f(t, newMariaDB(t)) })
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
	base := os.Getenv("MAILSPOOL_TEST_MYSQL")
	if base == "" {
		base = "mysql://root@127.0.0.1:3306/test"
	}
	root, err := dburl.Open(base)
	require.NoError(t, err)
	defer root.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := root.PingContext(ctx); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("MariaDB is required under CI=true but %s does not answer: %v", transport.Redact(base), err)
		}
		t.Skipf("MariaDB at %s does not answer (%v); start it with: start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql, or set MAILSPOOL_TEST_MYSQL", transport.Redact(base), err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "mailspool_t_" + hex.EncodeToString(b[:])
	_, err = root.ExecContext(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		if db, err := dburl.Open(base); err == nil {
			_, _ = db.Exec("DROP DATABASE IF EXISTS " + name)
			db.Close()
		}
	})
	u, _, _ := strings.Cut(base, "?")
	return openMigrated(t, "mariadb", u[:strings.LastIndex(u, "/")+1]+name)
}

func openList(t *testing.T, s store) *List {
	t.Helper()
	l, err := Open(s.db)
	require.NoError(t, err)
	return l
}

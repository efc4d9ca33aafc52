package suppress

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
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

// forEachStore runs f on a fresh SQLite file, MariaDB database and
// PostgreSQL database, each migrated (queue, suppression list, events).
// Under CI=true an unreachable server fails the test; elsewhere its part is
// skipped with a line saying how to start it.
func forEachStore(t *testing.T, f func(t *testing.T, s store)) {
	t.Run("sqlite", func(t *testing.T) { f(t, newSQLite(t)) })
	t.Run("mariadb", func(t *testing.T) { f(t, newMariaDB(t)) })
	t.Run("postgres", func(t *testing.T) { f(t, newPostgres(t)) })
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
	return newServer(t, "mariadb", "MAILSPOOL_TEST_MYSQL", "mysql://root@127.0.0.1:3306/test",
		"start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql", "DROP DATABASE IF EXISTS %s")
}

func newPostgres(t testing.TB) store {
	t.Helper()
	return newServer(t, "postgres", "MAILSPOOL_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/postgres",
		"pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start", "DROP DATABASE IF EXISTS %s WITH (FORCE)")
}

// newServer makes a database of its own on the server env (or def) names.
func newServer(t testing.TB, name, env, def, start, drop string) store {
	t.Helper()
	base := os.Getenv(env)
	if base == "" {
		base = def
	}
	root, err := dburl.Open(base)
	require.NoError(t, err)
	defer root.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := root.PingContext(ctx); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required under CI=true but %s does not answer: %v", name, transport.Redact(base), err)
		}
		t.Skipf("%s at %s does not answer (%v); start it with: %s, or set %s", name, transport.Redact(base), err, start, env)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	db := "mailspool_t_" + hex.EncodeToString(b[:])
	_, err = root.ExecContext(context.Background(), "CREATE DATABASE "+db)
	require.NoError(t, err)
	t.Cleanup(func() {
		if r, err := dburl.Open(base); err == nil {
			_, _ = r.Exec(fmt.Sprintf(drop, db))
			r.Close()
		}
	})
	u, query, _ := strings.Cut(base, "?")
	u = u[:strings.LastIndex(u, "/")+1] + db
	if query != "" {
		u += "?" + query
	}
	return openMigrated(t, name, u)
}
func openList(t *testing.T, s store) *List {
	t.Helper()
	l, err := Open(s.db)
	require.NoError(t, err)
	return l
}

// Package dburltest gives a test a database of its own on one of the
// servers the test suite runs against (MariaDB and PostgreSQL on
// loopback), as net/http/httptest gives it a server.
//
// Under CI=true a server that does not answer fails the test; elsewhere the
// test is skipped with a line saying how to start the server, so that the
// suite passes on a machine without one.
package dburltest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/transport"
)

// Server is a database server the tests may create databases on.
type Server struct {
	// Name is what test output calls it, e.g. "mariadb".
	Name string
	// Env names the variable that overrides Default.
	Env string
	// Default is the URL of a database on the server that always exists.
	Default string
	// Start is the command that starts the server on this machine.
	Start string
	// drop is the statement that drops a database, %s its name.
	drop string
}

// The servers of the test suite.
var (
	MariaDB = Server{
		Name: "mariadb", Env: "MAILSPOOL_TEST_MYSQL", Default: "mysql://root@127.0.0.1:3306/test",
		Start: "start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql",
		drop:  "DROP DATABASE IF EXISTS %s",
	}
	Postgres = Server{
		Name: "postgres", Env: "MAILSPOOL_TEST_POSTGRES", Default: "postgres://postgres@127.0.0.1:5432/postgres",
		Start: "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
		drop:  "DROP DATABASE IF EXISTS %s WITH (FORCE)",
	}
)

// URL is the URL of the server's always-present database: $Env or Default.
func (s Server) URL() string {
	if u := os.Getenv(s.Env); u != "" {
		return u
	}
	return s.Default
}

// Each runs f as three subtests, "sqlite", "mariadb" and "postgres", each
// with the URL of an empty database of its own: a new SQLite file in the
// test's temporary directory, and a Fresh database on MariaDB and on
// PostgreSQL.
func Each(t *testing.T, f func(t *testing.T, name, url string)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { f(t, "sqlite", "sqlite:"+filepath.Join(t.TempDir(), "q.db")) })
	t.Run("mariadb", func(t *testing.T) { f(t, "mariadb", MariaDB.Fresh(t)) })
	t.Run("postgres", func(t *testing.T) { f(t, "postgres", Postgres.Fresh(t)) })
}

// Fresh creates an empty database of its own on s for t, dropped when t
// ends, and returns its URL (with the query of s's URL). Only the ping is
// bounded: creating a database takes what a loaded machine needs.
func (s Server) Fresh(t testing.TB) string {
	t.Helper()
	base := s.URL()
	root, err := dburl.Open(base)
	if err != nil {
		t.Fatalf("dburltest: %v", err)
	}
	defer root.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := root.PingContext(ctx); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required under CI=true but %s does not answer: %v", s.Name, transport.Redact(base), err)
		}
		t.Skipf("%s at %s does not answer (%v); start it with: %s, or set %s", s.Name, transport.Redact(base), err, s.Start, s.Env)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "mailspool_t_" + hex.EncodeToString(b[:])
	if _, err := root.ExecContext(context.Background(), "CREATE DATABASE "+name); err != nil {
		t.Fatalf("dburltest: creating a database on %s: %v", s.Name, err)
	}
	t.Cleanup(func() {
		if r, err := dburl.Open(base); err == nil {
			_, _ = r.Exec(fmt.Sprintf(s.drop, name))
			r.Close()
		}
	})
	u, query, _ := strings.Cut(base, "?")
	u = u[:strings.LastIndex(u, "/")+1] + name
	if query != "" {
		u += "?" + query
	}
	return u
}

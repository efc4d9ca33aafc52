package queue

import (
	"context"
	"database/sql"
	"fmt"
	"net/mail"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/queue/dburl/dburltest"
	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/require"
)

// store is one database a test runs against.
type store struct {
	name string // "sqlite", "mariadb" or "postgres"
	url  string
	db   *sql.DB
}

// open returns another handle (its own connection pool) on the same database.
func (s store) open(t testing.TB) *sql.DB {
	t.Helper()
	db, err := dburl.Open(s.url)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// openWith is open with the URL's parameters extended by params.
func (s store) openWith(t testing.TB, params string) *sql.DB {
	t.Helper()
	sep := "?"
	if strings.Contains(s.url, "?") {
		sep = "&"
	}
	db, err := dburl.Open(s.url + sep + params)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// forEachStore runs f as a subtest on a fresh SQLite file, a fresh MariaDB
// database and a fresh PostgreSQL database, all migrated. Under CI=true an
// unreachable server fails the test; elsewhere it skips that store's
// subtest, saying how to start the server.
func forEachStore(t *testing.T, f func(t *testing.T, s store)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		s := newSQLiteStore(t)
		f(t, s)
	})
	t.Run("mariadb", func(t *testing.T) {
		s := newMariaDBStore(t)
		f(t, s)
	})
	t.Run("postgres", func(t *testing.T) {
		s := newPostgresStore(t)
		f(t, s)
	})
}

// newServerStore returns a store on a database of its own on server,
// migrated, dropped after the test.
func newServerStore(t testing.TB, name string, server dburltest.Server) store {
	t.Helper()
	s := store{name: name, url: server.Fresh(t)}
	s.db = s.open(t)
	require.NoError(t, Migrate(context.Background(), s.db))
	return s
}

func newPostgresStore(t testing.TB) store {
	t.Helper()
	return newServerStore(t, "postgres", dburltest.Postgres)
}

func newSQLiteStore(t testing.TB) store {
	t.Helper()
	u := "sqlite:" + filepath.Join(t.TempDir(), "queue.db")
	s := store{name: "sqlite", url: u}
	s.db = s.open(t)
	require.NoError(t, Migrate(context.Background(), s.db))
	return s
}

func newMariaDBStore(t testing.TB) store {
	t.Helper()
	return newServerStore(t, "mariadb", dburltest.MariaDB)
}

// manualClock is a Clock that only moves when told to.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func newManualClock() *manualClock {
	return &manualClock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// After fires at once: tests drive the worker cycle by cycle.
func (c *manualClock) After(time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return ch
}

func newQueue(t testing.TB, db *sql.DB, lane Lane, clock Clock) *Queue {
	t.Helper()
	var opts *Options
	if clock != nil {
		opts = &Options{Clock: clock}
	}
	q, err := New(context.Background(), db, lane, opts)
	require.NoError(t, err)
	return q
}

func testMessage(to string) *transport.Message {
	return &transport.Message{
		From:    mail.Address{Name: "Shop", Address: "noreply@shop.example"},
		To:      mail.Address{Name: "Jürgen Groß", Address: to},
		Subject: "Willkommen — 欢迎",
		Text:    "Hello\n.\nbye",
		HTML:    "<p>Hello</p>",
		Headers: []transport.Header{{Name: "List-Unsubscribe", Value: "<https://shop.example/u/1>"}},
	}
}

// rowState reads the columns tests look at.
type rowState struct {
	Status, Attempts, Crashes int
	NextRun                   int64
	LockedBy, LastKind        string
	LastCode, MaybeDelivered  int
	LastError, ProviderID     string
}

func readRow(t *testing.T, q *Queue, id int64) rowState {
	t.Helper()
	var r rowState
	err := q.db.QueryRow(q.d.rebind(`SELECT status, attempts, crashes, next_run, locked_by, last_kind, last_code, maybe_delivered, last_error, provider_id FROM `+q.table+` WHERE id = ?`), id).
		Scan(&r.Status, &r.Attempts, &r.Crashes, &r.NextRun, &r.LockedBy, &r.LastKind, &r.LastCode, &r.MaybeDelivered, &r.LastError, &r.ProviderID)
	require.NoError(t, err)
	r.LockedBy = strings.TrimSpace(r.LockedBy)
	r.LastKind = strings.TrimSpace(r.LastKind)
	return r
}

func countRows(t *testing.T, db *sql.DB, table, where string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(rebindFor(t, db, fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE %s", table, where)), args...).Scan(&n))
	return n
}

// rebindFor is stmt, written with ? placeholders, as db's store takes it.
func rebindFor(t testing.TB, db *sql.DB, stmt string) string {
	t.Helper()
	d, err := detectDialect(context.Background(), db)
	require.NoError(t, err)
	return d.rebind(stmt)
}

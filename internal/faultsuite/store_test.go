package faultsuite

import (
	"context"
	"database/sql"
	"fmt"
	"net/mail"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/mailspool/mailspool/internal/placeholder"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/queue/dburl/dburltest"
	"github.com/mailspool/mailspool/suppress"
	"github.com/mailspool/mailspool/transport"
)

// table is the lane table every scenario uses.
const table = "mail_queue"

// store is the database of one scenario.
type store struct {
	name string // "mariadb" or "sqlite"
	url  string
	db   *sql.DB
}

// newMariaDB creates a fresh database on the suite's MariaDB
// (127.0.0.1:3306, or $MAILSPOOL_TEST_MYSQL; not the one the restart
// scenario restarts: that one is private), migrated, and drops it when the
// test ends; a server that does not answer fails the test under CI=true
// and skips it elsewhere.
func newMariaDB(t *testing.T) store {
	t.Helper()
	return migrated(t, "mariadb", dburltest.MariaDB.Fresh(t))
}

// newPostgres creates a fresh database on the suite's PostgreSQL
// (127.0.0.1:5432, or $MAILSPOOL_TEST_POSTGRES), migrated, and drops it
// when the test ends; a server that does not answer fails the test under
// CI=true and skips it elsewhere.
func newPostgres(t *testing.T) store {
	t.Helper()
	return migrated(t, "postgres", dburltest.Postgres.Fresh(t))
}

// serverStores are the database servers the scenarios that need one run
// on, each as a subtest.
var serverStores = []struct {
	name string
	open func(*testing.T) store
}{{"mariadb", newMariaDB}, {"postgres", newPostgres}}

// sql returns stmt, written with ? placeholders, as s's store takes it.
func (s store) sql(stmt string) string { return placeholder.For(s.db, stmt) }

// newSQLite creates a fresh SQLite file, migrated.
func newSQLite(t *testing.T) store {
	t.Helper()
	return migrated(t, "sqlite", "sqlite:"+filepath.Join(t.TempDir(), "queue.db"))
}

func migrated(t *testing.T, name, url string) store {
	t.Helper()
	s := store{name: name, url: url, db: openDB(t, url)}
	// As "mailspool migrate" does: the queue's tables and the suppression
	// list, which every worker's claim consults.
	if err := queue.Migrate(context.Background(), s.db, table); err != nil {
		t.Fatal(err)
	}
	if err := suppress.Migrate(context.Background(), s.db); err != nil {
		t.Fatal(err)
	}
	return s
}

func openDB(t *testing.T, url string) *sql.DB {
	t.Helper()
	db, err := dburl.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// enqueue queues n mails to distinct recipients the way an application
// does (queue.Enqueue inside its own transactions, here 250 mails each,
// from 4 connections at once), and returns their ids.
func enqueue(t *testing.T, s store, n int, prefix string) []int64 {
	t.Helper()
	q := newQueue(t, s)
	ctx := context.Background()
	const chunk = 250
	ids := make([]int64, n)
	errs := make(chan error, (n+chunk-1)/chunk)
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for start := 0; start < n; start += chunk {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			tx, err := s.db.BeginTx(ctx, nil)
			if err != nil {
				errs <- err
				return
			}
			for i := start; i < min(n, start+chunk); i++ {
				if ids[i], err = q.Enqueue(ctx, tx, message(prefix+"-"+strconv.Itoa(i)+"@example.com")); err != nil {
					_ = tx.Rollback()
					errs <- err
					return
				}
			}
			errs <- tx.Commit()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("enqueue: %v", err)
		}
	}
	return ids
}

// newQueue is the scenario's lane as the application sees it.
func newQueue(t *testing.T, s store) *queue.Queue {
	t.Helper()
	q, err := queue.New(context.Background(), s.db, queue.Lane{Table: table, RecipientLimit: queue.NoLimit, IPLimit: queue.NoLimit}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func message(to string) *transport.Message {
	return &transport.Message{
		From:    mail.Address{Name: "Shop", Address: "noreply@shop.example"},
		To:      mail.Address{Address: to},
		Subject: "Your receipt",
		Text:    "Thank you for your order.\n",
	}
}

// countWhere counts the scenario table's rows matching where.
func countWhere(t *testing.T, s store, where string, args ...any) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow(s.sql(fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE %s", table, where)), args...).Scan(&n); err != nil {
		t.Fatalf("counting rows where %s: %v", where, err)
	}
	return n
}

// status values as stored, for the SQL the scenarios run.
var (
	pending = queue.StatusPending
	sending = queue.StatusSending
	sent    = queue.StatusSent
	retry   = queue.StatusRetry
	failed  = queue.StatusFailed
)

// heldBy counts the rows in sending under a lease of the worker process
// pid (a worker's default id is host-pid-random; its claims are id.seq).
func heldBy(t *testing.T, s store, pid int) int {
	t.Helper()
	return countWhere(t, s, "status = ? AND locked_by LIKE ?", sending, "%-"+strconv.Itoa(pid)+"-%")
}

func itoa(i int) string { return strconv.Itoa(i) }

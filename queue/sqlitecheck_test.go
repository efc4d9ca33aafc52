package queue

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNewChecksTheSQLiteHandle: a handle that would fail under concurrency
// (no busy timeout, deferred transactions) is refused with an error saying
// how to open it; the dburl handle is accepted.
func TestNewChecksTheSQLiteHandle(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	for dsn, want := range map[string]string{
		"file:" + path: "no busy timeout and deferred transactions",
		"file:" + path + "?_pragma=busy_timeout(5000)":                  "deferred transactions",
		"file:" + path + "?_txlock=immediate":                           "no busy timeout",
		"file:" + path + "?_pragma=busy_timeout(5000)&_txlock=deferred": "deferred transactions",
	} {
		db, err := sql.Open("sqlite", dsn)
		require.NoError(t, err)
		_, err = New(ctx, db, Lane{}, nil)
		db.Close()
		require.Error(t, err, dsn)
		assert.Contains(t, err.Error(), want, dsn)
		assert.Contains(t, err.Error(), "dburl.Open", dsn)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_txlock=immediate")
	require.NoError(t, err)
	defer db.Close()
	_, err = New(ctx, db, Lane{}, nil)
	require.NoError(t, err)
	_, err = New(ctx, newSQLiteStore(t).db, Lane{}, nil)
	require.NoError(t, err)
}

// TestTableNamesNeverCollide: a lane table may not be mailspool's own table
// or look like another lane's rate-limit table or table of mail bodies,
// and Migrate refuses two
// names that are one table (SQLite ignores the case of table names).
func TestTableNamesNeverCollide(t *testing.T) {
	db := newSQLiteStore(t).db
	for _, table := range []string{"mailspool_schema", "MAILSPOOL_LANES", "mail_queue_limits", "Mail_LIMITS", "mail_queue_bodies", "Mail_Bodies"} {
		_, err := New(context.Background(), db, Lane{Table: table}, nil)
		assert.Error(t, err, table)
		assert.Error(t, Migrate(context.Background(), db, table), table)
	}
	err := Migrate(context.Background(), db, "t_a", "T_A")
	assert.ErrorContains(t, err, "are the same table")
}

// TestWorkerOnOneSQLiteConnection: a handle limited to one connection
// (SetMaxOpenConns(1), common advice for SQLite) drains its queue. The
// worker must never need a second connection while its transaction holds
// the only one, as preparing a statement on the *sql.DB would.
func TestWorkerOnOneSQLiteConnection(t *testing.T) {
	s := newSQLiteStore(t)
	s.db.SetMaxOpenConns(1)
	q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
	const n = 600
	enqueueN(t, q, n)
	tr := newFuncTransport(nil)
	w, err := NewWorker(q, tr, &WorkerOptions{Batch: 100, Concurrency: 8, PollInterval: 10 * time.Millisecond, Logger: quietLogger()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	waitProgress(t, "drain on one connection", 20*time.Second, n, func() int { return int(w.Stats().Sent) })
	cancel()
	require.NoError(t, <-done)
	assert.Len(t, tr.sends, n)
	assert.Equal(t, n, countRows(t, s.db, q.table, "status = 2 AND locked_by = ''"))
}

// TestSQLiteWritersTakeTurns: the queue's own writers in one process wait
// for their turn at the database file instead of polling SQLite's lock
// under the busy timeout. Here the second handle's busy timeout is 50 ms
// and the first holds the write lock for longer: polling would fail with
// "database is locked"; waiting for the turn succeeds when it is released.
// A writer waiting for its turn gives up when its context ends.
func TestSQLiteWritersTakeTurns(t *testing.T) {
	s := newSQLiteStore(t)
	ctx := context.Background()
	q1 := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
	path := q1.file
	impatient, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(50)&_txlock=immediate")
	require.NoError(t, err)
	t.Cleanup(func() { impatient.Close() })
	q2 := newQueue(t, impatient, Lane{RecipientLimit: NoLimit}, nil)
	ids := enqueueN(t, q1, 1)

	tx, done, err := q1.beginWrite(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(`UPDATE `+q1.table+` SET template = 'first' WHERE id = ?`, ids[0])
	require.NoError(t, err)
	second := make(chan error, 1)
	go func() {
		second <- q2.write(ctx, func(db execer) error {
			_, err := db.ExecContext(ctx, `UPDATE `+q2.table+` SET template = 'second' WHERE id = ?`, ids[0])
			return err
		})
	}()
	time.Sleep(300 * time.Millisecond) // six busy timeouts of the second handle
	require.NoError(t, tx.Commit())
	done()
	require.NoError(t, <-second, "the second writer waited for its turn")
	var template string
	require.NoError(t, s.db.QueryRow(`SELECT template FROM `+q1.table+` WHERE id = ?`, ids[0]).Scan(&template))
	assert.Equal(t, "second", template)

	held, done, err := q1.beginWrite(ctx)
	require.NoError(t, err)
	defer done()
	defer held.Rollback() //nolint:errcheck // nothing was written
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	err = q2.write(short, func(execer) error { return nil })
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestEnqueueThroughAnotherHandle: on SQLite the enqueue's INSERTs are
// prepared once on the Queue's handle; an application may still enqueue in
// a transaction of another handle on the same database, and in one on the
// Queue's own handle, and a Queue made before Migrate enqueues once the
// tables exist.
func TestEnqueueThroughAnotherHandle(t *testing.T) {
	s := newSQLiteStore(t)
	ctx := context.Background()
	q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
	other := s.open(t)
	for _, db := range []*sql.DB{other, s.db} {
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = q.Enqueue(ctx, tx, testMessage("ann@example.com"))
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
	}
	_, err := q.Enqueue(ctx, s.db, testMessage("bob@example.com"))
	require.NoError(t, err)
	assert.Equal(t, 3, countRows(t, s.db, q.table, "1=1"))

	early := newQueue(t, s.db, Lane{Table: "mail_later", RecipientLimit: NoLimit}, nil)
	require.NoError(t, Migrate(ctx, s.db, "mail_later"))
	_, err = early.Enqueue(ctx, s.db, testMessage("cy@example.com"))
	require.NoError(t, err)
	m, err := early.Message(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, testMessage("x").Text, m.Text)
}

// TestSQLiteWritesTryForTheLockOften: while an application holds SQLite's
// write lock, the queue's own write waits for it trying often, so that it
// takes the lock as soon as it is free, ahead of the application's
// writers that wait on SQLite's busy schedule (sleeps of up to 100 ms).
// Eight times, three application writers and one queue write wait behind
// a held lock; the queue's write must come first at least six times (on
// SQLite's schedule alike it came first three times in six).
// Afterwards every connection of the pool has its busy timeout again,
// and a queue write behind a lock held past the busy timeout gives up
// with SQLITE_BUSY.
func TestSQLiteWritesTryForTheLockOften(t *testing.T) {
	s := newSQLiteStore(t)
	ctx := context.Background()
	q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
	id := enqueueN(t, q, 1)[0]
	open := func(timeout int) *sql.DB {
		db, err := sql.Open("sqlite", fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)&_txlock=immediate", q.file, timeout))
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		return db
	}
	holder, app := open(10000), open(10000)
	update := `UPDATE ` + q.table + ` SET template = ? WHERE id = ?`

	first := 0
	for range 8 {
		held, err := holder.BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = held.Exec(update, "held", id)
		require.NoError(t, err)
		order := make(chan string, 4)
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() {
				_, err := app.ExecContext(ctx, update, fmt.Sprintf("app %d", i), id)
				assert.NoError(t, err)
				order <- "app"
			})
		}
		wg.Go(func() {
			assert.NoError(t, q.write(ctx, func(db execer) error {
				order <- "queue"
				_, err := db.ExecContext(ctx, update, "queue", id)
				return err
			}))
		})
		// Long enough for the application's writers to sleep 100 ms at a
		// time (after 228 ms of waiting).
		time.Sleep(400 * time.Millisecond)
		require.NoError(t, held.Commit())
		if <-order == "queue" {
			first++
		}
		wg.Wait()
	}
	assert.GreaterOrEqual(t, first, 6, "times of 8 the queue's write took the freed lock first")

	// The pool's connections all have the handle's busy timeout.
	var conns []*sql.Conn
	for range 3 {
		c, err := s.db.Conn(ctx)
		require.NoError(t, err)
		conns = append(conns, c)
	}
	for _, c := range conns {
		var timeout int
		require.NoError(t, c.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&timeout))
		assert.Equal(t, q.busyTimeout.Milliseconds(), int64(timeout))
		c.Close()
	}

	// Behind a lock held past the busy timeout, the write gives up.
	impatient := newQueue(t, open(50), Lane{RecipientLimit: NoLimit}, nil)
	held, err := holder.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer held.Rollback() //nolint:errcheck // nothing to keep
	_, err = held.Exec(update, "held", id)
	require.NoError(t, err)
	err = impatient.write(ctx, func(execer) error { return nil })
	require.Error(t, err)
	assert.True(t, sqliteBusy(err), "SQLITE_BUSY: %v", err)
}

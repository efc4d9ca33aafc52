package queue

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// sqliteOpenHint says how to open an SQLite database for the queue.
const sqliteOpenHint = `open it with dburl.Open("sqlite:path/to/file.db"), or with the DSN "file:path/to/file.db?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate"`

// checkSQLite refuses an SQLite handle on which concurrent writers fail
// instead of waiting their turn: without a busy timeout a writer that finds
// the database locked fails at once with SQLITE_BUSY, and a deferred
// transaction that reads first and writes later cannot wait for the lock at
// all (beside a worker, 379 of 400 such enqueues failed).
//
// It returns the handle's busy timeout.
func checkSQLite(ctx context.Context, db *sql.DB) (busyTimeout time.Duration, err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("queue: checking the SQLite handle: %w", err)
	}
	defer conn.Close()
	var timeout int
	if err := conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&timeout); err != nil {
		return 0, fmt.Errorf("queue: checking the SQLite handle: %w", err)
	}
	var problems []string
	if timeout <= 0 {
		problems = append(problems, "no busy timeout")
	}
	if mode := sqliteBeginMode(conn); mode != "" && !strings.EqualFold(mode, "immediate") && !strings.EqualFold(mode, "exclusive") {
		problems = append(problems, "deferred transactions (_txlock="+mode+")")
	}
	if len(problems) > 0 {
		return 0, fmt.Errorf("queue: the SQLite handle has %s, so concurrent enqueues and the worker would fail with SQLITE_BUSY: %s", strings.Join(problems, " and "), sqliteOpenHint)
	}
	return time.Duration(timeout) * time.Millisecond, nil
}

// sqliteBeginMode returns how modernc.org/sqlite begins transactions on
// conn ("deferred", "immediate", "exclusive"), or "" when it cannot tell.
// The driver keeps the _txlock parameter of the DSN in an unexported field;
// there is no SQL that reports it.
func sqliteBeginMode(conn *sql.Conn) string {
	mode := ""
	_ = conn.Raw(func(dc any) error {
		v := reflect.ValueOf(dc)
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			return nil
		}
		if f := v.Elem().FieldByName("beginMode"); f.IsValid() && f.Kind() == reflect.String {
			mode = f.String()
			if mode == "" {
				mode = "deferred"
			}
		}
		return nil
	})
	return mode
}

// The queue's own write transactions on SQLite try for the write lock
// themselves, every sqliteTryFirst at first and at most sqliteTryLast
// apart, rather than on SQLite's busy schedule, which sleeps 1, 2, 5, ...
// up to 100 ms between tries. Beside an application that enqueues
// steadily from several connections, a worker sleeping so found the lock
// taken again at nearly every try, and mail waited for its claim (bench
// --steady, 4 producers, 4 workers, 50 ms poll: commit to send p50 137
// ms, p99 723 ms; with one producer 21 and 74 ms). Trying often, it takes
// the lock in the gaps between the application's transactions. The
// application's own waits keep SQLite's schedule.
const (
	sqliteTryFirst = 250 * time.Microsecond
	sqliteTryLast  = 2 * time.Millisecond
)

// beginSQLite begins a write transaction on conn: BEGIN IMMEDIATE with
// the connection's busy timeout set to none, tried again on SQLITE_BUSY
// until the handle's busy timeout has passed (q.busyTimeout), then the
// busy timeout set back, inside the transaction, for its statements. A
// connection whose busy timeout could not be set back is discarded, not
// returned to the pool, where the application's writes would fail at once
// on it.
func (q *Queue) beginSQLite(ctx context.Context, conn *sql.Conn, opts *sql.TxOptions) (*sql.Tx, error) {
	restore := fmt.Sprintf("PRAGMA busy_timeout = %d", q.busyTimeout.Milliseconds())
	if _, err := conn.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
		discard(conn)
		return nil, err
	}
	giveUp := time.Now().Add(q.busyTimeout)
	pause := sqliteTryFirst
	for {
		tx, err := conn.BeginTx(ctx, opts)
		if err == nil {
			if _, err := tx.ExecContext(ctx, restore); err != nil {
				tx.Rollback() //nolint:errcheck // the error above is the one to report
				discard(conn)
				return nil, err
			}
			return tx, nil
		}
		if sqliteBusy(err) && !time.Now().After(giveUp) {
			select {
			case <-ctx.Done():
				err = ctx.Err()
			case <-time.After(withJitter(pause/2, 1)):
				pause = min(pause*5/4, sqliteTryLast)
				continue
			}
		}
		if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), restore); rerr != nil {
			discard(conn)
		}
		return nil, err
	}
}

// discard makes the pool close conn rather than reuse it.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
}

// sqliteBusy reports whether err is SQLite's SQLITE_BUSY: the database is
// locked by another connection.
func sqliteBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

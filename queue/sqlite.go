package queue

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strings"
)

// sqliteOpenHint says how to open an SQLite database for the queue.
const sqliteOpenHint = `open it with dburl.Open("sqlite:path/to/file.db"), or with the DSN "file:path/to/file.db?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate"`

// checkSQLite refuses an SQLite handle on which concurrent writers fail
// instead of waiting their turn: without a busy timeout a writer that finds
// the database locked fails at once with SQLITE_BUSY, and a deferred
// transaction that reads first and writes later cannot wait for the lock at
// all (beside a worker, 379 of 400 such enqueues failed).
func checkSQLite(ctx context.Context, db *sql.DB) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("queue: checking the SQLite handle: %w", err)
	}
	defer conn.Close()
	var timeout int
	if err := conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&timeout); err != nil {
		return fmt.Errorf("queue: checking the SQLite handle: %w", err)
	}
	var problems []string
	if timeout <= 0 {
		problems = append(problems, "no busy timeout")
	}
	if mode := sqliteBeginMode(conn); mode != "" && !strings.EqualFold(mode, "immediate") && !strings.EqualFold(mode, "exclusive") {
		problems = append(problems, "deferred transactions (_txlock="+mode+")")
	}
	if len(problems) > 0 {
		return fmt.Errorf("queue: the SQLite handle has %s, so concurrent enqueues and the worker would fail with SQLITE_BUSY: %s", strings.Join(problems, " and "), sqliteOpenHint)
	}
	return nil
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

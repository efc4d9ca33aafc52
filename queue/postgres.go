package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mailspool/mailspool/internal/placeholder"
)

// PostgreSQL is reached through pgx's database/sql driver
// (github.com/jackc/pgx/v5/stdlib), so that an application's own *sql.Tx
// carries the enqueue as it does on the other stores. The queue's
// statements are written with ? placeholders; rebind numbers them for
// PostgreSQL. Claims are one SELECT ... FOR UPDATE SKIP LOCKED on the
// (status, next_run, id) index, new ids come back by RETURNING, and the
// bodies stay in the row (PostgreSQL keeps long values out of line, in
// TOAST, and an UPDATE that does not change them does not copy them).

// rebind numbers the ? placeholders of stmt for PostgreSQL.
func (d dialect) rebind(stmt string) string {
	if !d.postgres {
		return stmt
	}
	return placeholder.Numbered(stmt)
}

// pgLockConflict reports whether err is PostgreSQL's deadlock (40P01),
// lock wait timeout (55P03) or serialization failure (40001).
func pgLockConflict(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "40P01", "55P03", "40001":
		return true
	}
	return false
}

// pgLockTimeout reports whether err is PostgreSQL's lock wait timeout.
func pgLockTimeout(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55P03"
}

// pgAborted reports whether err came from the PostgreSQL server: after a
// failed statement the server refuses every statement of the transaction
// (or savepoint) until it is rolled back, so there is nothing left to undo
// by hand.
func pgAborted(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}

const postgresOpenHint = `open it with dburl.Open("postgres://user@host:5432/dbname"), which sets lock_timeout=5s, or add lock_timeout=5s to the connection string`

// checkPostgres refuses a PostgreSQL handle whose connections would wait
// for a lock without limit (lock_timeout = 0, the server's default): the
// queue's statements on MySQL and MariaDB give up after a few seconds, so
// that an operator's LOCK TABLE or a long schema change makes a worker
// retry and an enqueue fail with an error, instead of hanging them for as
// long as it lasts. PostgreSQL bounds the wait per connection.
func checkPostgres(ctx context.Context, db *sql.DB) error {
	var timeout string
	if err := db.QueryRowContext(ctx, "SHOW lock_timeout").Scan(&timeout); err != nil {
		return fmt.Errorf("queue: checking the PostgreSQL handle: %w", err)
	}
	if timeout == "0" {
		return fmt.Errorf("queue: the PostgreSQL handle waits for locks without limit (lock_timeout=0), so a claim or an enqueue behind a LOCK TABLE or a schema change would hang: %s", postgresOpenHint)
	}
	return nil
}

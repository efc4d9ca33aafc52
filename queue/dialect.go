package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/mailspool/mailspool/internal/sqlstore"
)

// dialect holds the few places where MySQL/MariaDB, PostgreSQL and SQLite
// differ.
type dialect struct {
	sqlite     bool
	postgres   bool // PostgreSQL through pgx's database/sql driver (postgres.go)
	mariadb    bool // MariaDB rather than MySQL (only when neither sqlite nor postgres)
	skipLocked bool // the server has SELECT ... FOR UPDATE SKIP LOCKED
	// returning: INSERT ... RETURNING, with scalar subqueries in it
	// (SQLite, MariaDB >= 10.5; not MySQL).
	returning bool
	// readUncommitted: the server runs a transaction in READ UNCOMMITTED
	// the way InnoDB does (claimTxOptions); TiDB, which reports a MySQL
	// version, refuses that level.
	readUncommitted bool
}

// detectDialect tells the store behind db from its driver and, for MySQL,
// from the server's version string.
func detectDialect(ctx context.Context, db *sql.DB) (dialect, error) {
	store, err := sqlstore.Of(db)
	switch store {
	case sqlstore.SQLite:
		return dialect{sqlite: true, returning: true}, nil
	case sqlstore.Postgres:
		return dialect{postgres: true, skipLocked: true, returning: true}, nil
	case sqlstore.MySQL:
		var version string
		if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
			return dialect{}, fmt.Errorf("queue: reading the server version: %w", err)
		}
		return mysqlDialect(version), nil
	}
	return dialect{}, fmt.Errorf("queue: %w", err)
}

// mysqlDialect derives the dialect from a VERSION() string such as
// "10.11.19-MariaDB-0+deb12u1" or "8.0.36".
func mysqlDialect(version string) dialect {
	lower := strings.ToLower(version)
	d := dialect{mariadb: strings.Contains(lower, "mariadb"), readUncommitted: !strings.Contains(lower, "tidb")}
	major, minor, patch := parseVersion(version)
	if d.mariadb {
		d.skipLocked = major > 10 || (major == 10 && minor >= 6)
		d.returning = major > 10 || (major == 10 && minor >= 5)
	} else {
		d.skipLocked = major > 8 || (major == 8 && (minor > 0 || patch >= 1))
	}
	return d
}

func parseVersion(v string) (major, minor, patch int) {
	if i := strings.IndexFunc(v, func(r rune) bool { return r != '.' && (r < '0' || r > '9') }); i >= 0 {
		v = v[:i]
	}
	parts := strings.SplitN(v, ".", 3)
	nums := [3]int{}
	for i, p := range parts {
		nums[i], _ = strconv.Atoi(p)
	}
	return nums[0], nums[1], nums[2]
}

// statementTimeout bounds claim, completion and cleanup statements on the
// server: a client-side timeout closes the connection but would leave the
// statement and its locks running.
const statementTimeout = 5 * time.Second

// bounded prefixes stmt so that the server itself gives up on it after
// statementTimeout, and waits at most that long for a row lock.
func (d dialect) bounded(stmt string) string {
	secs := int(statementTimeout / time.Second)
	switch {
	case d.sqlite:
		return stmt // busy_timeout bounds lock waits; there is no server
	case d.postgres:
		// The connection's lock_timeout bounds lock waits (see
		// checkPostgres); the text only needs PostgreSQL's placeholders.
		return d.rebind(stmt)
	case d.mariadb:
		return fmt.Sprintf("SET STATEMENT max_statement_time=%d, innodb_lock_wait_timeout=%d FOR %s", secs, secs, stmt)
	case strings.HasPrefix(stmt, "SELECT"):
		return fmt.Sprintf("SELECT /*+ MAX_EXECUTION_TIME(%d) SET_VAR(innodb_lock_wait_timeout=%d) */%s", secs*1000, secs, stmt[len("SELECT"):])
	default:
		// MySQL: SET_VAR hints apply to UPDATE and DELETE too.
		verb, rest, _ := strings.Cut(stmt, " ")
		return fmt.Sprintf("%s /*+ SET_VAR(innodb_lock_wait_timeout=%d) */ %s", verb, secs, rest)
	}
}

// byID follows the table and its alias in the claim's locking read, which
// names its rows by id and tests their status and due time: it holds the
// server to the primary key. Left to itself, MariaDB reads the status's
// due range of the (status, next_run, id) index instead whenever that
// range looks smaller than the id list: when the workers keep up with the
// producers, few rows are due and most of the ids a claim read a moment
// ago have been taken by other claims. Through that index a locking read
// locks each entry before it looks at the row, and SKIP LOCKED, which
// acts on the row, leaves the entry's lock in place: the claim kept locks
// on the entries of rows another claim held, that claim's marking waited
// for them, and two claims in that position deadlocked (seen draining
// 100 000 mails with four worker processes). SQLite reads an id list by
// rowid on its own.
func (d dialect) byID() string {
	if d.sqlite || d.postgres {
		return ""
	}
	return " FORCE INDEX (PRIMARY)"
}

// mysqlSkipLocked: the claim picks in two steps (pickLocking), as it
// does on MySQL/MariaDB with SKIP LOCKED.
func (d dialect) mysqlSkipLocked() bool { return !d.sqlite && !d.postgres && d.skipLocked }

// claimIndex follows the lane table in the claim's reads of the due order,
// holding the server to the (status, nice, next_run, id) index. Left to
// itself MariaDB takes idx_pick's (status, next_run) range whenever it
// looks smaller, and sorts it: about as cheap while few rows are due, and
// a sort of the whole backlog when many are. SQLite and PostgreSQL pick it on
// their own.
func (d dialect) claimIndex() string {
	if d.sqlite || d.postgres {
		return ""
	}
	return " FORCE INDEX (idx_claim)"
}

// lockSkip is appended to the claim SELECT: lock the picked rows and skip
// rows other claimers hold, where the server can.
func (d dialect) lockSkip() string {
	switch {
	case d.sqlite:
		return "" // SQLite serialises writers: the claim transaction is BEGIN IMMEDIATE
	case d.skipLocked:
		return " FOR UPDATE SKIP LOCKED"
	default:
		return " FOR UPDATE"
	}
}

// txOptions are the options of the queue's own transactions: READ
// COMMITTED on MySQL, where a statement that scans rows other sessions hold
// locked skips those that do not match instead of waiting for them.
func (d dialect) txOptions() *sql.TxOptions {
	if d.sqlite {
		return nil // BEGIN IMMEDIATE (set by the DSN): SQLite serialises writers
	}
	return &sql.TxOptions{Isolation: sql.LevelReadCommitted}
}

// claimTxOptions are the options of a claim's transaction. On MySQL with
// SKIP LOCKED, READ UNCOMMITTED: the claim's one plain read, the due keys
// of pickLocking, then passes over the index entries of rows that other
// claims have already taken without looking each one up in the table to
// decide which version it may see (under READ COMMITTED the entries of
// recently claimed rows each cost a clustered-index lookup). It is only a
// list of candidates: the locking read that follows takes a row only under
// its lock, on its latest committed version, and skips rows another
// transaction holds, an uncommitted insert included. InnoDB's locking
// reads and updates behave the same under READ UNCOMMITTED as under READ
// COMMITTED. Elsewhere (SQLite, no SKIP LOCKED, TiDB), txOptions.
func (d dialect) claimTxOptions() *sql.TxOptions {
	if !d.sqlite && !d.postgres && d.skipLocked && d.readUncommitted {
		return &sql.TxOptions{Isolation: sql.LevelReadUncommitted}
	}
	return d.txOptions()
}

// write runs the writes f makes in one short transaction: on MySQL in READ
// COMMITTED (a plain statement would run in the session's REPEATABLE READ
// and, should the server scan the table, wait for every row another
// session holds, related or not); on SQLite as BEGIN IMMEDIATE, so that
// many small statements take the write lock once.
func (q *Queue) write(ctx context.Context, f func(execer) error) error {
	tx, done, err := q.beginWrite(ctx)
	if err != nil {
		return fmt.Errorf("queue: begin: %w", err)
	}
	defer done()
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if err := f(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("queue: commit: %w", err)
	}
	return nil
}

// sqliteTurns holds, per SQLite database file, the turn to write among
// this process's queues on it: a channel with room for one.
//
// SQLite lets one writer at a time in; a writer that finds the database
// locked sleeps and tries again (1, 2, 5, ... up to 100 ms), so the lock
// often sits unused while writers sleep. Within a process, the worker's
// claims, completions and rescues (and other workers' on the same file)
// wait for their turn here instead, and start as soon as the previous
// writer is done. Other processes (the application's enqueues) still meet
// them at SQLite's lock, under its busy timeout.
var sqliteTurns sync.Map // file path → chan struct{}

// beginWrite begins one of the queue's own write transactions, on SQLite
// once it is this process's turn to write to the file. done must be called
// after the transaction ends.
func (q *Queue) beginWrite(ctx context.Context) (tx *sql.Tx, done func(), err error) {
	return q.beginWriteWith(ctx, q.d.txOptions())
}

// beginWriteWith is beginWrite with the given transaction options.
func (q *Queue) beginWriteWith(ctx context.Context, opts *sql.TxOptions) (tx *sql.Tx, done func(), err error) {
	done = func() {}
	if q.writeTurn != nil {
		select {
		case q.writeTurn <- struct{}{}:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		done = func() { <-q.writeTurn }
	}
	if !q.d.sqlite {
		if tx, err = q.db.BeginTx(ctx, opts); err != nil {
			done()
			return nil, nil, err
		}
		return tx, done, nil
	}
	conn, err := q.db.Conn(ctx)
	if err != nil {
		done()
		return nil, nil, err
	}
	if tx, err = q.beginSQLite(ctx, conn, opts); err != nil {
		conn.Close()
		done()
		return nil, nil, err
	}
	turnDone := done
	done = func() { conn.Close(); turnDone() } // after the transaction ended
	return tx, done, nil
}

// isLockConflict reports whether err is a MySQL deadlock (1213) or lock
// wait timeout (1205), or PostgreSQL's (see pgLockConflict).
func isLockConflict(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205) || pgLockConflict(err)
}

// quote quotes an identifier that was validated by validTable.
// store is the store's name as package sqlstore gives it.
func (d dialect) store() sqlstore.Name {
	switch {
	case d.sqlite:
		return sqlstore.SQLite
	case d.postgres:
		return sqlstore.Postgres
	}
	return sqlstore.MySQL
}

func (d dialect) quote(ident string) string {
	if d.sqlite || d.postgres {
		return `"` + ident + `"`
	}
	return "`" + ident + "`"
}

// placeholders returns "?,?,?" for n values.
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?,", n-1) + "?"
}

// lockBounded prefixes an enqueue statement so that the server waits at
// most secs for a table's metadata lock (LOCK TABLES, a schema change) or a
// row lock, instead of the server's lock_wait_timeout (a day by default).
func (d dialect) lockBounded(stmt string, secs int) string {
	switch {
	case d.sqlite:
		return stmt // the busy timeout bounds SQLite's waits
	case d.postgres:
		return d.rebind(stmt) // the connection's lock_timeout bounds the wait
	case d.mariadb:
		return fmt.Sprintf("SET STATEMENT lock_wait_timeout=%d, innodb_lock_wait_timeout=%d FOR %s", secs, secs, stmt)
	default:
		verb, rest, _ := strings.Cut(stmt, " ")
		return fmt.Sprintf("%s /*+ SET_VAR(lock_wait_timeout=%d) SET_VAR(innodb_lock_wait_timeout=%d) */ %s", verb, secs, secs, rest)
	}
}

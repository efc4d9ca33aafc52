package bench

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/mailspool/mailspool/queue/dburl"
)

// probe watches one connection pool at the driver: it times every explicit
// transaction (in a worker's pool the only one is the claim: completions,
// releases and rescues are single autocommit statements) and counts
// deadlocks reported by the server.
type probe struct {
	mu        sync.Mutex
	txs       []time.Duration
	deadlocks int
	where     map[string]int // deadlocks by the start of the statement
}

func (p *probe) tx(d time.Duration) {
	p.mu.Lock()
	p.txs = append(p.txs, d)
	p.mu.Unlock()
}

// check counts err if it is a deadlock of query ("COMMIT" for a commit).
func (p *probe) check(query string, err error) error {
	if isDeadlock(err) {
		p.mu.Lock()
		p.deadlocks++
		if p.where == nil {
			p.where = map[string]int{}
		}
		p.where[statementHead(query)]++
		p.mu.Unlock()
	}
	return err
}

// statementHead is the start of a statement, without the server-side
// bound prefix, to say where deadlocks happen.
func statementHead(q string) string {
	if _, rest, ok := strings.Cut(q, " FOR "); ok && strings.HasPrefix(q, "SET STATEMENT") {
		q = rest
	}
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > 60 {
		q = q[:60]
	}
	return q
}

// deadlockSites returns "statement: count" for each statement that hit a
// deadlock.
func (p *probe) deadlockSites() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for q, n := range p.where {
		out = append(out, fmt.Sprintf("%dx %s", n, q))
	}
	return out
}

// take returns and forgets what was recorded so far.
func (p *probe) take() ([]time.Duration, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	txs, dl := p.txs, p.deadlocks
	p.txs, p.deadlocks = nil, 0
	return txs, dl
}

// isDeadlock reports a MySQL/MariaDB deadlock (error 1213) or a
// PostgreSQL one (40P01).
func isDeadlock(err error) bool {
	if err == nil {
		return false
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1213
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40P01"
	}
	return strings.Contains(err.Error(), "Deadlock found")
}

// openDB opens rawURL as package dburl does; with p set, through p. The
// handle's Driver() is the real driver, so the queue recognises its store.
func openDB(rawURL string, p *probe) (*sql.DB, error) {
	plain, err := dburl.Open(rawURL)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return plain, nil
	}
	drv := plain.Driver()
	plain.Close()
	if _, ok := drv.(*mysql.MySQLDriver); ok { // perhaps several hosts: dburl's connector
		c, err := dburl.MySQLConnector(rawURL)
		if err != nil {
			return nil, err
		}
		db := sql.OpenDB(probeConnector{Connector: c, p: p})
		db.SetConnMaxLifetime(5 * time.Minute)
		return db, nil
	}
	var dsn string
	switch drv.(type) {
	case *stdlib.Driver:
		dsn, err = dburl.PostgresDSN(rawURL)
	default:
		dsn, err = dburl.SQLiteDSN(rawURL)
	}
	if err != nil {
		return nil, err
	}
	var c driver.Connector = dsnConnector{drv: drv, dsn: dsn}
	if dc, ok := drv.(driver.DriverContext); ok {
		if c, err = dc.OpenConnector(dsn); err != nil {
			return nil, err
		}
	}
	db := sql.OpenDB(probeConnector{Connector: c, p: p})
	db.SetConnMaxLifetime(5 * time.Minute)
	return db, nil
}

type dsnConnector struct {
	drv driver.Driver
	dsn string
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.drv }

type probeConnector struct {
	driver.Connector
	p *probe
}

func (c probeConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &probeConn{inner: conn, p: c.p}, nil
}

// probeConn forwards to the driver's connection, timing transactions and
// counting deadlocks.
type probeConn struct {
	inner driver.Conn
	p     *probe
}

func (c *probeConn) Prepare(query string) (driver.Stmt, error) { return c.inner.Prepare(query) }

// Unwrap returns the driver's connection, for what needs it itself (the
// queue's LISTEN on PostgreSQL).
func (c *probeConn) Unwrap() driver.Conn { return c.inner }
func (c *probeConn) Close() error        { return c.inner.Close() }

func (c *probeConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *probeConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	start := time.Now()
	var tx driver.Tx
	var err error
	if b, ok := c.inner.(driver.ConnBeginTx); ok {
		tx, err = b.BeginTx(ctx, opts)
	} else {
		//lint:ignore SA1019 the driver has no BeginTx
		tx, err = c.inner.Begin()
	}
	if err != nil {
		return nil, c.p.check("BEGIN", err)
	}
	return &probeTx{inner: tx, p: c.p, start: start}, nil
}

func (c *probeConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if pc, ok := c.inner.(driver.ConnPrepareContext); ok {
		return pc.PrepareContext(ctx, query)
	}
	return c.inner.Prepare(query)
}

func (c *probeConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.inner.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	res, err := e.ExecContext(ctx, query, args)
	return res, c.p.check(query, err)
}

func (c *probeConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.inner.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	rows, err := q.QueryContext(ctx, query, args)
	return rows, c.p.check(query, err)
}

func (c *probeConn) Ping(ctx context.Context) error {
	if p, ok := c.inner.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *probeConn) ResetSession(ctx context.Context) error {
	if r, ok := c.inner.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *probeConn) IsValid() bool {
	if v, ok := c.inner.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *probeConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.inner.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

type probeTx struct {
	inner driver.Tx
	p     *probe
	start time.Time
}

func (t *probeTx) Commit() error {
	err := t.p.check("COMMIT", t.inner.Commit())
	t.p.tx(time.Since(t.start))
	return err
}

func (t *probeTx) Rollback() error {
	err := t.inner.Rollback()
	t.p.tx(time.Since(t.start))
	return err
}

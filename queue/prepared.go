package queue

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
)

// prepared runs statements in tx, preparing each distinct statement text
// once and reusing it for every later call with the same text, until tx
// ends (database/sql closes a transaction's statements at Commit or
// Rollback).
//
// It is for SQLite, where a statement costs no round trip and parsing it
// costs about as much as running it: a batch written one row at a time
// (writeEach, the claim's marking) parses one statement instead of one per
// row, which leaves one parse per batch. Preparing here on the *sql.DB
// instead would take a second connection while the transaction holds one:
// a handle limited to one connection (SetMaxOpenConns(1), common for
// SQLite) would wait for itself. (The enqueue, one row per transaction,
// has its statements prepared on the handle ahead of time, by New: see
// prepareShared.)
type prepared struct {
	tx    *sql.Tx
	stmts map[string]*sql.Stmt
}

// reusing returns db wrapped in prepared when it is a transaction, and db
// itself otherwise.
func reusing(db execer) execer {
	if tx, ok := db.(*sql.Tx); ok {
		return &prepared{tx: tx, stmts: map[string]*sql.Stmt{}}
	}
	return db
}

// ExecContext runs query with args, preparing query on first use.
func (p *prepared) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	s, ok := p.stmts[query]
	if !ok {
		var err error
		if s, err = p.tx.PrepareContext(ctx, query); err != nil {
			return nil, fmt.Errorf("preparing: %w", err)
		}
		p.stmts[query] = s
	}
	return s.ExecContext(ctx, args...)
}

// Statements prepared once per *sql.DB, for the enqueue on SQLite: an
// enqueue is its own short transaction (the application's), so
// preparing per transaction would save nothing, and parsing the two
// INSERTs cost about a third of it.
//
// They are prepared by New, when no transaction of the caller's holds a
// connection, and shared by every Queue on the same handle (a program that
// makes a Queue per request prepares nothing more). A *sql.Stmt prepared
// on the handle runs in a transaction through Tx.StmtContext, which
// prepares it on the transaction's own connection if it is not there yet.
var sharedStmts sync.Map // stmtKey → *sql.Stmt

type stmtKey struct {
	db    *sql.DB
	query string
}

// prepareShared returns query prepared on db, preparing it on first use.
func prepareShared(ctx context.Context, db *sql.DB, query string) (*sql.Stmt, error) {
	k := stmtKey{db, query}
	if s, ok := sharedStmts.Load(k); ok {
		return s.(*sql.Stmt), nil
	}
	s, err := db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if prev, loaded := sharedStmts.LoadOrStore(k, s); loaded {
		s.Close()
		return prev.(*sql.Stmt), nil
	}
	return s, nil
}

// execPrepared runs query, which s is prepared from on q.db (s may be nil),
// through exec: with s when exec is q.db or one of its transactions, else
// as plain text. A transaction of another handle is only known when
// database/sql refuses s for it, before running anything.
func (q *Queue) execPrepared(ctx context.Context, exec DBTX, s *sql.Stmt, query string, args ...any) (sql.Result, error) {
	switch e := exec.(type) {
	case *sql.Tx:
		if s != nil {
			res, err := e.StmtContext(ctx, s).ExecContext(ctx, args...)
			if err == nil || !strings.Contains(err.Error(), "statement from different database") {
				return res, err
			}
		}
	case *sql.DB:
		if s != nil && e == q.db {
			return s.ExecContext(ctx, args...)
		}
	}
	return exec.ExecContext(ctx, query, args...)
}

package queue

import (
	"context"
	"database/sql"
	"fmt"
)

// prepared runs statements in tx, preparing each distinct statement text
// once and reusing it for every later call with the same text, until tx
// ends (database/sql closes a transaction's statements at Commit or
// Rollback).
//
// It is for SQLite, where a statement costs no round trip and parsing it
// costs about as much as running it: a batch written one row at a time
// (writeEach, the claim's marking) parses one statement instead of one per
// row. Caching across transactions would need a statement prepared on the
// *sql.DB, which takes a second connection while the transaction holds
// one: a handle limited to one connection (SetMaxOpenConns(1), common for
// SQLite) would wait for itself.
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
	if p, ok := db.(*prepared); ok {
		return p
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

package suppress

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mailspool/mailspool/queue"
)

// List is the suppression list of one database. It is safe for concurrent
// use.
type List struct {
	db  *sql.DB
	d   dialect
	now func() time.Time
}

// Open returns the suppression list on db: MySQL/MariaDB, SQLite or
// PostgreSQL. It does not create the table; run Migrate first.
func Open(db *sql.DB) (*List, error) {
	if db == nil {
		return nil, errors.New("suppress: Open with a nil *sql.DB")
	}
	d, err := dialectOf(db)
	if err != nil {
		return nil, err
	}
	return &List{db: db, d: d, now: time.Now}, nil
}

// Execer is what the list writes through: a *sql.DB, or a transaction
// the write joins (the queue's completion, an event's insert).
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Querier is what a lookup reads through: a *sql.DB or a transaction (the
// enqueue's, the claim's). One with QueryContext looks many addresses up
// in one statement.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Add records e, replacing the entry of the same address and scope. Its
// CreatedAt defaults to now and its Scope to ScopeAll.
func (l *List) Add(ctx context.Context, e Entry) (Entry, error) {
	return l.AddIn(ctx, l.db, e)
}

// AddIn is Add through ex, a transaction the caller commits.
func (l *List) AddIn(ctx context.Context, ex Execer, e Entry) (Entry, error) {
	return l.add(ctx, ex, e, l.d.upsert())
}

// LearnIn records e, learnt from a send's outcome or a provider's event,
// through ex, a transaction the caller commits. Unlike AddIn it never
// shortens what is in place: an entry of the same address and scope that
// lasts as long or longer (one until removed, or one expiring later) is
// kept as it is, reason and all. A complaint kept until removed is not
// turned into a hard bounce that expires in 30 days by a later bounce
// from a lane whose policy keeps bounces that long.
func (l *List) LearnIn(ctx context.Context, ex Execer, e Entry) (Entry, error) {
	return l.add(ctx, ex, e, l.d.upsertLonger())
}

func (l *List) add(ctx context.Context, ex Execer, e Entry, upsert string) (Entry, error) {
	if e.CreatedAt.IsZero() {
		e.CreatedAt = l.now()
	}
	if err := e.check(); err != nil {
		return e, err
	}
	var expires any
	if !e.ExpiresAt.IsZero() {
		expires = e.ExpiresAt.UnixMilli()
	}
	_, err := ex.ExecContext(ctx, l.d.Rebind(`INSERT INTO `+Table+` (address, scope, reason, source, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`+upsert),
		e.Address, e.Scope, string(e.Reason), e.Source, e.CreatedAt.UnixMilli(), expires)
	if err != nil {
		return e, fmt.Errorf("suppress: adding %s: %w", e.Address, err)
	}
	return e, nil
}

// AddAll records every entry in one transaction: all or none. Each entry
// is checked before anything is written; the error names the first bad
// one by its position (from 1).
func (l *List) AddAll(ctx context.Context, es []Entry) error {
	now := l.now()
	for i := range es {
		if es[i].CreatedAt.IsZero() {
			es[i].CreatedAt = now
		}
		if err := es[i].check(); err != nil {
			return fmt.Errorf("entry %d: %w", i+1, err)
		}
	}
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("suppress: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	for _, e := range es {
		if _, err := l.AddIn(ctx, tx, e); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("suppress: commit: %w", err)
	}
	return nil
}

// Remove deletes the entries of address: in scope, or in every scope when
// scope is "". It returns how many it deleted.
func (l *List) Remove(ctx context.Context, address, scope string) (int64, error) {
	return l.RemoveIn(ctx, l.db, address, scope)
}

// RemoveIn is Remove through ex, a transaction the caller commits (the one
// that releases the mail held for the address: RemoveAndRelease).
func (l *List) RemoveIn(ctx context.Context, ex Execer, address, scope string) (int64, error) {
	a, err := Normalize(address)
	if err != nil {
		return 0, err
	}
	q, args := `DELETE FROM `+Table+` WHERE address = ?`, []any{a}
	if scope != "" {
		if err := CheckScope(scope); err != nil {
			return 0, err
		}
		q += ` AND scope = ?`
		args = append(args, scope)
	}
	res, err := ex.ExecContext(ctx, l.d.Rebind(q), args...)
	if err != nil {
		return 0, fmt.Errorf("suppress: removing %s: %w", a, err)
	}
	return res.RowsAffected()
}

// entryColumns are read by scanEntry.
const entryColumns = `address, scope, reason, source, created_at, expires_at`

type scanner interface{ Scan(dest ...any) error }

func scanEntry(s scanner) (Entry, error) {
	var e Entry
	var reason string
	var created int64
	var expires sql.NullInt64
	if err := s.Scan(&e.Address, &e.Scope, &reason, &e.Source, &created, &expires); err != nil {
		return e, err
	}
	e.Reason = Reason(reason)
	e.CreatedAt = time.UnixMilli(created).UTC()
	if expires.Valid {
		e.ExpiresAt = time.UnixMilli(expires.Int64).UTC()
	}
	return e, nil
}

// Lookup returns, of addrs, those suppressed for mail of lane now (an
// entry of scope "all" or lane that has not expired), keyed by the
// address as given. It reads through q: the caller's transaction, so that
// the answer is the one its writes are made under.
func (l *List) Lookup(ctx context.Context, q Querier, lane string, addrs []string) (map[string]Entry, error) {
	return l.LookupScopes(ctx, q, []string{lane}, addrs)
}

// LookupScopes is Lookup for mail that belongs to several scopes besides
// "all": a lane and a list of it (package unsubscribe).
func (l *List) LookupScopes(ctx context.Context, q Querier, scopes []string, addrs []string) (map[string]Entry, error) {
	norm := make(map[string][]string, len(addrs)) // normalized → as given
	var args []any
	for _, a := range addrs {
		n, err := Normalize(a)
		if err != nil {
			continue // an address that does not parse was never suppressed
		}
		if _, seen := norm[n]; !seen {
			args = append(args, n)
		}
		norm[n] = append(norm[n], a)
	}
	if len(args) == 0 {
		return nil, nil
	}
	where := `scope IN (?` + strings.Repeat(`, ?`, len(scopes)) + `) AND (expires_at IS NULL OR expires_at > ?)`
	tail := []any{ScopeAll}
	for _, s := range scopes {
		tail = append(tail, s)
	}
	tail = append(tail, l.now().UnixMilli())
	found := map[string]Entry{}
	keep := func(e Entry) {
		for _, given := range norm[e.Address] {
			if old, ok := found[given]; !ok || e.CreatedAt.Before(old.CreatedAt) {
				found[given] = e
			}
		}
	}
	rq, many := q.(interface {
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	})
	if !many || len(args) == 1 {
		for _, a := range args {
			e, err := scanEntry(q.QueryRowContext(ctx, l.d.Rebind(`SELECT `+entryColumns+` FROM `+Table+` WHERE address = ? AND `+where+` ORDER BY created_at LIMIT 1`), append([]any{a}, tail...)...))
			switch {
			case errors.Is(err, sql.ErrNoRows):
				continue
			case err != nil:
				return nil, fmt.Errorf("suppress: looking up %s: %w", a, err)
			}
			keep(e)
		}
		return found, nil
	}
	rows, err := rq.QueryContext(ctx, l.d.Rebind(`SELECT `+entryColumns+` FROM `+Table+` WHERE address IN (`+strings.Repeat("?,", len(args)-1)+`?) AND `+where), append(args, tail...)...)
	if err != nil {
		return nil, fmt.Errorf("suppress: looking up %d addresses: %w", len(args), err)
	}
	defer rows.Close()
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return nil, fmt.Errorf("suppress: reading an entry: %w", err)
		}
		keep(e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("suppress: looking up %d addresses: %w", len(args), err)
	}
	return found, nil
}

// Filter selects entries for Entries. Zero fields select everything.
type Filter struct {
	Address string    // one address (normalized before the lookup)
	Reason  Reason    // one reason
	Scope   string    // one scope
	Since   time.Time // made at or after
	Until   time.Time // made before
	Expired bool      // include entries that have expired
	Limit   int       // at most this many, newest first (0 = all)
	Offset  int       // skip this many first (with Limit)
}

// Entries returns the entries f selects, newest first.
func (l *List) Entries(ctx context.Context, f Filter) ([]Entry, error) {
	var conds []string
	var args []any
	if f.Address != "" {
		a, err := Normalize(f.Address)
		if err != nil {
			return nil, err
		}
		conds, args = append(conds, `address = ?`), append(args, a)
	}
	if f.Reason != "" {
		if _, err := ParseReason(string(f.Reason)); err != nil {
			return nil, err
		}
		conds, args = append(conds, `reason = ?`), append(args, string(f.Reason))
	}
	if f.Scope != "" {
		if err := CheckScope(f.Scope); err != nil {
			return nil, err
		}
		conds, args = append(conds, `scope = ?`), append(args, f.Scope)
	}
	if !f.Since.IsZero() {
		conds, args = append(conds, `created_at >= ?`), append(args, f.Since.UnixMilli())
	}
	if !f.Until.IsZero() {
		conds, args = append(conds, `created_at < ?`), append(args, f.Until.UnixMilli())
	}
	if !f.Expired {
		conds, args = append(conds, `(expires_at IS NULL OR expires_at > ?)`), append(args, l.now().UnixMilli())
	}
	q := `SELECT ` + entryColumns + ` FROM ` + Table
	if len(conds) > 0 {
		q += ` WHERE ` + strings.Join(conds, ` AND `)
	}
	q += ` ORDER BY created_at DESC, address, scope`
	if f.Limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, f.Limit)
		if f.Offset > 0 {
			q += fmt.Sprintf(` OFFSET %d`, f.Offset)
		}
	}
	rows, err := l.db.QueryContext(ctx, l.d.Rebind(q), args...)
	if err != nil {
		return nil, fmt.Errorf("suppress: listing: %w", err)
	}
	defer rows.Close()
	out := []Entry{}
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return nil, fmt.Errorf("suppress: reading an entry: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("suppress: listing: %w", err)
	}
	return out, nil
}

// RemoveAndRelease removes address's entries (in scope, or every scope
// when scope is "") and, in the same transaction, makes the mail held for
// it in each of queues due at once (queue.Queue.ReleaseHeld): both happen
// or neither. It returns the entries removed and the mails released; a
// released mail is checked against the list again at its claim, so one
// still suppressed under another entry is held again, not sent.
func (l *List) RemoveAndRelease(ctx context.Context, address, scope string, queues []*queue.Queue) (removed, released int64, err error) {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("suppress: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if removed, err = l.RemoveIn(ctx, tx, address, scope); err != nil {
		return 0, 0, err
	}
	for _, q := range queues {
		n, err := q.ReleaseHeld(ctx, tx, address)
		if err != nil {
			return 0, 0, err
		}
		released += n
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, fmt.Errorf("suppress: commit: %w", err)
	}
	return removed, released, nil
}

// ReasonCount is how many entries of one reason are in force.
type ReasonCount struct {
	Reason Reason `json:"reason"`
	Count  int64  `json:"count"`
	// AtLeast: there are more than Count (CountByReason's cap), and Count
	// is the cap.
	AtLeast bool `json:"at_least,omitempty"`
}

// CountByReason counts the entries in force for mail of lane (scope "all"
// or lane), by reason, in the order of Reasons; reasons without entries
// are left out. Each reason is counted up to capAt (0: no cap), each count
// one range of the (reason, scope, expires_at) index, so that its cost is
// bounded however long the list grows; a count that reaches the cap says
// AtLeast.
func (l *List) CountByReason(ctx context.Context, lane string, capAt int) ([]ReasonCount, error) {
	if err := CheckScope(lane); err != nil {
		return nil, err
	}
	limit := ""
	if capAt > 0 {
		limit = fmt.Sprintf(` LIMIT %d`, capAt+1)
	}
	q := l.d.Rebind(`SELECT COUNT(*) FROM (SELECT 1 AS one FROM ` + Table + ` WHERE reason = ? AND scope IN (?, ?) AND (expires_at IS NULL OR expires_at > ?)` + limit + `) capped`)
	now := l.now().UnixMilli()
	out := []ReasonCount{}
	for _, r := range Reasons {
		var n int64
		if err := l.db.QueryRowContext(ctx, q, string(r), ScopeAll, lane, now).Scan(&n); err != nil {
			return nil, fmt.Errorf("suppress: counting: %w", err)
		}
		switch {
		case n == 0:
			continue
		case capAt > 0 && n > int64(capAt):
			out = append(out, ReasonCount{Reason: r, Count: int64(capAt), AtLeast: true})
		default:
			out = append(out, ReasonCount{Reason: r, Count: n})
		}
	}
	return out, nil
}

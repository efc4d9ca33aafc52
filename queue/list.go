package queue

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mailspool/mailspool/mailaddr"
)

// Filter selects mails of a lane; zero fields select everything.
type Filter struct {
	// Status is one of pending, sending, sent, retry or failed.
	Status string
	// To is a recipient address, normalized as Enqueue stores it
	// (mailaddr.Normalize: any spelling of the domain finds the mailbox)
	// and matched in any letter case. It is looked up through an index
	// (see Migrate), never by a scan.
	To string
	// Template is the template name given at enqueue.
	Template string
	// Kind is the last outcome: sent, temporary, permanent, connection,
	// expired, poison or cancelled.
	Kind string
	// Since keeps mails enqueued at or after it.
	Since time.Time
	// ProviderIDs, when not nil, keeps the mails whose provider id (stored
	// when they were sent) is one of them: what list --event finds from
	// the provider events (package inbound). An empty, non-nil list keeps
	// nothing. At most 1000.
	ProviderIDs []string
	// MessageID keeps the mail whose Message-ID header is this (with or
	// without its angle brackets); ProviderID the mail the provider (SES,
	// SendGrid, the relay) named so when it accepted it, as given or
	// bracketed. Both are read through an index.
	MessageID  string
	ProviderID string
}

// ParseStatus returns the stored status for a name StatusName returns.
func ParseStatus(name string) (int, error) {
	for s := StatusPending; s <= StatusFailed; s++ {
		if StatusName(s) == name {
			return s, nil
		}
	}
	return 0, fmt.Errorf("queue: unknown status %q (want pending, sending, sent, retry or failed)", name)
}

// where returns the SQL condition for f and its arguments.
func (q *Queue) where(f Filter) (string, []any, error) {
	conds := []string{"1=1"}
	var args []any
	if f.Status != "" {
		s, err := ParseStatus(f.Status)
		if err != nil {
			return "", nil, err
		}
		conds, args = append(conds, "status = ?"), append(args, s)
	}
	if f.To != "" {
		to, err := mailaddr.Normalize(f.To)
		if err != nil {
			return "", nil, fmt.Errorf("queue: recipient filter: %w", err)
		}
		if q.d.sqlite || q.d.postgres {
			conds, args = append(conds, "lower(to_addr) = lower(?)"), append(args, to)
		} else {
			// The server hashes the address the way the to_hash column
			// does; to_addr (a case-insensitive collation) settles a
			// collision.
			conds, args = append(conds, "to_hash = UNHEX(LEFT(SHA2(LOWER(?), 256), 16)) AND to_addr = ?"), append(args, to, to)
		}
	}
	if f.Template != "" {
		conds, args = append(conds, "template = ?"), append(args, f.Template)
	}
	if f.Kind != "" {
		conds, args = append(conds, "last_kind = ?"), append(args, f.Kind)
	}
	if !f.Since.IsZero() {
		conds, args = append(conds, "created_at >= ?"), append(args, f.Since.UnixMilli())
	}
	if f.ProviderIDs != nil {
		switch n := len(f.ProviderIDs); {
		case n == 0:
			conds = append(conds, "1=0")
		case n > MaxListLimit:
			return "", nil, fmt.Errorf("queue: %d provider ids, at most %d", n, MaxListLimit)
		default:
			conds = append(conds, "provider_id IN ("+placeholders(n)+")")
			for _, id := range f.ProviderIDs {
				args = append(args, id)
			}
		}
	}
	if f.MessageID != "" {
		conds, args = append(conds, "message_id = ?"), append(args, strings.TrimSuffix(strings.TrimPrefix(f.MessageID, "<"), ">"))
	}
	if f.ProviderID != "" {
		// An SMTP relay's answer is a Message-ID, which a support ticket
		// quotes with or without its brackets.
		bare := strings.TrimSuffix(strings.TrimPrefix(f.ProviderID, "<"), ">")
		conds, args = append(conds, "provider_id IN (?, ?)"), append(args, bare, "<"+bare+">")
	}
	return strings.Join(conds, " AND "), args, nil
}

// ListOptions select a page of List.
type ListOptions struct {
	Filter
	// Limit is the page size (default 50, at most 1000).
	Limit int
	// Before keeps ids below it: pass the last id of a page to get the next.
	Before int64
}

// MaxListLimit is the largest ListOptions.Limit.
const MaxListLimit = 1000

// List returns the lane's mails that match o, newest (highest id) first,
// without their bodies. By recipient it reads an index range; with other
// filters it walks the table from the newest row, which the server bounds
// to a few seconds on a large history.
func (q *Queue) List(ctx context.Context, o ListOptions) ([]Row, error) {
	if o.Limit == 0 {
		o.Limit = 50
	}
	if o.Limit < 1 || o.Limit > MaxListLimit {
		return nil, fmt.Errorf("queue: list limit %d out of range 1..%d", o.Limit, MaxListLimit)
	}
	query, args, err := q.listQuery(o)
	if err != nil {
		return nil, err
	}
	rows, err := q.db.QueryContext(ctx, q.d.bounded(query), args...)
	if err != nil {
		return nil, fmt.Errorf("queue: list: %w", err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		r, err := scanRow(rows)
		if err != nil {
			return nil, fmt.Errorf("queue: list: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queue: list: %w", err)
	}
	return out, nil
}

// listQuery is List's statement for o (before bounded) and its arguments.
func (q *Queue) listQuery(o ListOptions) (string, []any, error) {
	cond, args, err := q.where(o.Filter)
	if err != nil {
		return "", nil, err
	}
	if o.Before > 0 {
		cond, args = cond+" AND id < ?", append(args, o.Before)
	}
	return `SELECT ` + rowColumns + ` FROM ` + q.table + ` WHERE ` + cond + ` ORDER BY id DESC LIMIT ?`, append(args, o.Limit), nil
}

// Count counts the lane's mails that match f.
func (q *Queue) Count(ctx context.Context, f Filter) (int64, error) {
	cond, args, err := q.where(f)
	if err != nil {
		return 0, err
	}
	var n int64
	if err := q.db.QueryRowContext(ctx, q.d.bounded(`SELECT COUNT(*) FROM `+q.table+` WHERE `+cond), args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("queue: count: %w", err)
	}
	return n, nil
}

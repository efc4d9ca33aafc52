package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrNotFound is returned by Row for an id that is not in the lane's table.
var ErrNotFound = errors.New("queue: no such mail")

// Row is what an operator needs to answer "why did my mail not arrive":
// its state, its attempts, the last outcome and the provider's message id
// to look up in the provider's logs.
type Row struct {
	ID             int64
	Status         string
	Attempts       int
	MaxAttempts    int
	To             string
	Subject        string
	Template       string
	MessageID      string // our Message-ID header
	ProviderID     string // the provider's id, once sent
	LastKind       string // sent, temporary, permanent, connection or expired
	LastCode       int
	LastRule       string // the classification rule that decided the last failure
	LastError      string
	MaybeDelivered bool
	// Crashes counts the leases that expired while the mail was sending:
	// its worker died or hung, so it may have been delivered then.
	Crashes   int
	CreatedAt time.Time
	NextRun   time.Time // due (pending, retry), lease end (sending), finished (sent, failed)
	SentAt    time.Time // zero unless sent
}

// Row reads one mail of the lane by id.
func (q *Queue) Row(ctx context.Context, id int64) (Row, error) {
	var r Row
	var status, maybe int
	var created, next, sent int64
	err := q.db.QueryRowContext(ctx, `SELECT id, status, attempts, max_attempts, to_addr, subject, template, message_id,
  provider_id, last_kind, last_code, last_rule, last_error, maybe_delivered, crashes, created_at, next_run, sent_at FROM `+q.table+` WHERE id = ?`, id).
		Scan(&r.ID, &status, &r.Attempts, &r.MaxAttempts, &r.To, &r.Subject, &r.Template, &r.MessageID,
			&r.ProviderID, &r.LastKind, &r.LastCode, &r.LastRule, &r.LastError, &maybe, &r.Crashes, &created, &next, &sent)
	if errors.Is(err, sql.ErrNoRows) {
		return Row{}, fmt.Errorf("%w: id %d in %s", ErrNotFound, id, q.lane.Table)
	}
	if err != nil {
		return Row{}, fmt.Errorf("queue: reading mail %d: %w", id, err)
	}
	r.Status = StatusName(status)
	r.LastKind = strings.TrimSpace(r.LastKind)
	r.MaybeDelivered = maybe != 0
	r.CreatedAt, r.NextRun = time.UnixMilli(created), time.UnixMilli(next)
	if sent != 0 {
		r.SentAt = time.UnixMilli(sent)
	}
	return r, nil
}

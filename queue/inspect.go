package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mailspool/mailspool/transport"
)

// ErrNotFound matches the error for an id that is not in the lane's table.
var ErrNotFound = errors.New("queue: no such mail")

// Row is what an operator needs to answer "why did my mail not arrive":
// its state, its attempts, the last outcome and the provider's message id
// to look up in the provider's logs. Its JSON form uses snake_case names and
// leaves out the times of what has not happened.
type Row struct {
	ID          int64  `json:"id"`
	Status      string `json:"status"` // pending, sending, sent, retry or failed
	Attempts    int    `json:"attempts"`
	MaxAttempts int    `json:"max_attempts"`
	Priority    int    `json:"priority"`              // MinPriority..MaxPriority, given at enqueue
	Attachments int    `json:"attachments,omitempty"` // files stored with it (see Queue.Attachments)
	From        string `json:"from"`
	To          string `json:"to"`
	Subject     string `json:"subject"`
	Template    string `json:"template,omitempty"`
	MessageID   string `json:"message_id"`            // our Message-ID header
	ProviderID  string `json:"provider_id,omitempty"` // the provider's id, once sent
	// Member is the member of the lane's composite transport (failover,
	// roundrobin) that gave the last outcome; empty for a plain transport.
	Member string `json:"member,omitempty"`
	// LastKind is the last outcome: sent, temporary, permanent, connection,
	// expired (the not-after deadline passed), poison (its worker died on it
	// every time) or cancelled (by an operator).
	LastKind string `json:"last_kind,omitempty"`
	LastCode int    `json:"last_code,omitempty"`
	LastRule string `json:"last_rule,omitempty"` // the classification rule that decided the last failure
	// LastScope is what the last failure was about: recipient, message,
	// sender, transient or lane (see transport.Scope); empty for a row
	// settled without a reply (expired, poison, cancelled) or failed
	// before the column existed.
	LastScope string `json:"last_scope,omitempty"`
	LastError string `json:"last_error,omitempty"`
	// EarlierFailure is the failure of an attempt before the one that
	// sent the mail: history, not the mail's state. A sent row's
	// LastCode, LastRule, LastScope and LastError are empty; what the
	// table still holds of an earlier failure is here.
	EarlierFailure *EarlierFailure `json:"earlier_failure,omitempty"`
	MaybeDelivered bool            `json:"maybe_delivered,omitempty"`
	// Crashes counts the leases that expired while the mail was sending:
	// its worker died or hung, so it may have been delivered then.
	Crashes int `json:"crashes,omitempty"`
	// History has one line per operator action (retry, cancel), oldest
	// first.
	History   []string  `json:"history,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// DueAt is when a pending or retry row is due; LeaseEnds when a sending
	// row's lease ends; FinishedAt when a sent or failed row finished. Only
	// the one for the row's status is set.
	DueAt      time.Time `json:"due_at,omitzero"`
	LeaseEnds  time.Time `json:"lease_ends,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	SentAt     time.Time `json:"sent_at,omitzero"`
	NotAfter   time.Time `json:"not_after,omitzero"` // the deadline set at enqueue, if any
}

// EarlierFailure is the last failure of a mail that was sent after it.
type EarlierFailure struct {
	Code  int    `json:"code,omitempty"`
	Rule  string `json:"rule,omitempty"`
	Scope string `json:"scope,omitempty"`
	Error string `json:"error,omitempty"`
}

// rowColumns are read for a Row, in scanRow's order; no body.
const rowColumns = `id, status, attempts, max_attempts, nice, attachments, from_addr, to_addr, subject, template, message_id,
  provider_id, member, last_kind, last_code, last_rule, last_scope, last_error, maybe_delivered, crashes, history, created_at, next_run, sent_at, not_after`

type scanner interface{ Scan(dest ...any) error }

func scanRow(sc scanner) (Row, error) {
	var r Row
	var status, maybe int
	var history string
	var created, next, sent, notAfter int64
	var nice int
	if err := sc.Scan(&r.ID, &status, &r.Attempts, &r.MaxAttempts, &nice, &r.Attachments, &r.From, &r.To, &r.Subject, &r.Template, &r.MessageID,
		&r.ProviderID, &r.Member, &r.LastKind, &r.LastCode, &r.LastRule, &r.LastScope, &r.LastError, &maybe, &r.Crashes, &history, &created, &next, &sent, &notAfter); err != nil {
		return Row{}, err
	}
	r.Status = StatusName(status)
	r.Priority = MaxPriority - nice
	r.LastKind = strings.TrimSpace(r.LastKind)
	if r.LastKind == "sent" {
		// A send leaves the failure columns as they were (the row is
		// updated in place): they describe an earlier attempt.
		if f := (EarlierFailure{r.LastCode, r.LastRule, r.LastScope, r.LastError}); f != (EarlierFailure{}) {
			r.EarlierFailure = &f
		}
		r.LastCode, r.LastRule, r.LastScope, r.LastError = 0, "", "", ""
	}
	r.MaybeDelivered = maybe != 0
	if history != "" {
		r.History = strings.Split(history, "\n")
	}
	r.CreatedAt = time.UnixMilli(created)
	switch status {
	case StatusPending, StatusRetry:
		r.DueAt = time.UnixMilli(next)
	case StatusSending:
		r.LeaseEnds = time.UnixMilli(next)
	default:
		r.FinishedAt = time.UnixMilli(next)
	}
	if sent != 0 {
		r.SentAt = time.UnixMilli(sent)
	}
	if notAfter != 0 {
		r.NotAfter = time.UnixMilli(notAfter)
	}
	return r, nil
}

// Row reads one mail of the lane by id.
func (q *Queue) Row(ctx context.Context, id int64) (Row, error) {
	r, err := scanRow(q.db.QueryRowContext(ctx, q.d.rebind(`SELECT `+rowColumns+` FROM `+q.table+` WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return Row{}, q.notFound(id)
	}
	if err != nil {
		return Row{}, fmt.Errorf("queue: reading mail %d: %w", id, err)
	}
	return r, nil
}

func (q *Queue) notFound(id int64) error {
	return fmt.Errorf("%w: id %d in %s", ErrNotFound, id, q.lane.Table)
}

// Message reads the mail with the given id as it will be sent: addresses,
// subject, bodies and extra headers, as they were at enqueue time; its
// attachments are listed by Attachments.
func (q *Queue) Message(ctx context.Context, id int64) (*transport.Message, error) {
	m := &transport.Message{}
	var headers string
	var missing bool
	selectFrom, bodyMissing := q.withBodies(`message_id, from_addr, from_name, to_addr, to_name, reply_to_addr, reply_to_name, subject`)
	err := q.db.QueryRowContext(ctx, q.d.rebind(`SELECT `+bodyMissing+`, `+selectFrom+` WHERE t.id = ?`), id).
		Scan(&missing, &m.MessageID, &m.From.Address, &m.From.Name, &m.To.Address, &m.To.Name, &m.ReplyTo.Address, &m.ReplyTo.Name,
			&m.Subject, &m.Text, &m.HTML, &headers)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, q.notFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("queue: reading mail %d: %w", id, err)
	}
	if missing {
		return nil, fmt.Errorf("queue: mail %d: its bodies are missing from %s (deleted by hand?); the worker leaves it unsent", id, q.bodies)
	}
	if m.Headers, err = parseHeaders(headers); err != nil {
		return nil, err
	}
	return m, nil
}

package queue

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/mailspool/mailspool/transport"
)

// StuckAfter is how far past its lease a sending row must be to count as
// stuck.
const StuckAfter = 5 * time.Minute

// Stats are the numbers that explain most incidents.
type Stats struct {
	// Backlog is the mail not yet finished: pending + retry + sending.
	Backlog int64 `json:"backlog"`
	Pending int64 `json:"pending"`
	Retry   int64 `json:"retry"`
	Sending int64 `json:"sending"`
	// SentLastHour and FailedLastHour count rows that finished in the last
	// hour (mail an operator cancelled is not a failure); FailureRate is
	// Failed / (Sent + Failed), 0 when both are 0.
	SentLastHour   int64   `json:"sent_last_hour"`
	FailedLastHour int64   `json:"failed_last_hour"`
	FailureRate    float64 `json:"failure_rate_last_hour"`
	// Stuck counts sending rows whose lease ended more than StuckAfter ago:
	// a worker died or hangs on them, and no live worker has taken them over.
	Stuck int64 `json:"stuck_in_sending"`
	// SenderScope counts the mail held up by our sender: rows waiting on a
	// retry, and rows that failed in the last hour, whose last failure was
	// of sender scope (the provider refused our account, sending domain,
	// envelope sender or IP). Such failures repeat for every mail until an
	// operator acts; they raise the lane's "sender" alert.
	SenderScope int64 `json:"sender_scope"`
	// OldestDue is how long the most overdue pending or retry row has been
	// due without being claimed: 0 while workers keep up, growing when they
	// do not (or none runs).
	OldestDue time.Duration `json:"-"`
}

// Stats computes the lane's Stats. Each count is a range of the
// (status, next_run) index, whatever the size of the history.
func (q *Queue) Stats(ctx context.Context) (Stats, error) {
	now := q.clock.Now()
	var s Stats
	var senderRetry, senderFailed int64
	sender := transport.ScopeSender.String()
	counts := []struct {
		dst   *int64
		where string
		args  []any
	}{
		{&s.Pending, statusIs(StatusPending), nil},
		{&s.Retry, statusIs(StatusRetry), nil},
		{&s.Sending, statusIs(StatusSending), nil},
		{&s.SentLastHour, statusIs(StatusSent) + " AND next_run > ?", []any{now.Add(-time.Hour).UnixMilli()}},
		{&s.FailedLastHour, statusIs(StatusFailed) + " AND next_run > ? AND last_kind <> ?", []any{now.Add(-time.Hour).UnixMilli(), kindCancelled}},
		{&s.Stuck, statusIs(StatusSending) + " AND next_run < ?", []any{now.Add(-StuckAfter).UnixMilli()}},
		{&senderRetry, statusIs(StatusRetry) + " AND last_scope = ?", []any{sender}},
		{&senderFailed, statusIs(StatusFailed) + " AND next_run > ? AND last_scope = ?", []any{now.Add(-time.Hour).UnixMilli(), sender}},
	}
	for _, c := range counts {
		err := q.db.QueryRowContext(ctx, q.d.bounded(`SELECT COUNT(*) FROM `+q.table+` WHERE `+c.where), c.args...).Scan(c.dst)
		if err != nil {
			return Stats{}, fmt.Errorf("queue: stats (%s): %w", c.where, err)
		}
	}
	for _, status := range []int{StatusPending, StatusRetry} {
		var due int64
		err := q.db.QueryRowContext(ctx, q.d.bounded(`SELECT next_run FROM `+q.table+` WHERE status = ? AND next_run <= ? ORDER BY next_run LIMIT 1`),
			status, now.UnixMilli()).Scan(&due)
		if err == sql.ErrNoRows {
			continue
		}
		if err != nil {
			return Stats{}, fmt.Errorf("queue: stats (oldest due %s row): %w", StatusName(status), err)
		}
		s.OldestDue = max(s.OldestDue, now.Sub(time.UnixMilli(due)))
	}
	s.Backlog = s.Pending + s.Retry + s.Sending
	s.SenderScope = senderRetry + senderFailed
	if done := s.SentLastHour + s.FailedLastHour; done > 0 {
		s.FailureRate = float64(s.FailedLastHour) / float64(done)
	}
	return s, nil
}

// SentSince counts the lane's mail sent at or after t (one range of the
// (status, next_run) index): the denominator of rates over a window, such
// as the complaint rate (package alert).
func (q *Queue) SentSince(ctx context.Context, t time.Time) (int64, error) {
	var n int64
	err := q.db.QueryRowContext(ctx, q.d.bounded(`SELECT COUNT(*) FROM `+q.table+` WHERE `+statusIs(StatusSent)+` AND next_run >= ?`), t.UnixMilli()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("queue: counting sent mail: %w", err)
	}
	return n, nil
}

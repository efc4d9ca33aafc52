package queue

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// claimColumns are read for each claimed row.
const claimColumns = `id, attempts, max_attempts, crashes, not_after, maybe_delivered, created_at, message_id,
  from_addr, from_name, to_addr, to_name, reply_to_addr, reply_to_name, subject, text_body, html_body, headers`

// claim takes up to n due rows for token in one short transaction and
// leases them until now + lease: it locks the picked rows and marks them
// sending with locked_by = token. The attempts column is not touched
// (state.go explains the accounting). Rows are picked one status at a time,
// each an index range in due order: pending first (so fresh mail is never
// stuck behind a deferred backlog), then retry if the batch is not full.
// Rows whose lease expired are not claimed here: the rescuer (rescue.go)
// returns them to pending or retry first. With SKIP LOCKED, concurrent
// claimers never wait for each other.
func (q *Queue) claim(ctx context.Context, token string, n int, lease time.Duration) ([]*job, error) {
	if n <= 0 {
		return nil, nil
	}
	now := q.now()
	tx, err := q.db.BeginTx(ctx, q.d.txOptions())
	if err != nil {
		return nil, fmt.Errorf("queue: claim: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit

	var jobs []*job
	for _, status := range []int{StatusPending, StatusRetry} {
		if len(jobs) == n {
			break
		}
		picked, err := q.pickRows(ctx, tx, status, now, n-len(jobs))
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, picked...)
	}
	jobs = isolateSuspects(jobs)
	if len(jobs) == 0 {
		return nil, tx.Commit()
	}
	leaseEnd := now + lease.Milliseconds()
	args := []any{token, leaseEnd, leaseEnd}
	for _, j := range jobs {
		args = append(args, j.id)
		j.token = token
		j.attempts++
	}
	stmt := `UPDATE ` + q.table + ` SET status = ` + strconv.Itoa(StatusSending) + `, locked_by = ?, locked_until = ?, next_run = ?
  WHERE id IN (` + placeholders(len(jobs)) + `)`
	if _, err := tx.ExecContext(ctx, q.d.bounded(stmt), args...); err != nil {
		return nil, fmt.Errorf("queue: claim: marking rows sending: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("queue: claim: commit: %w", err)
	}
	return jobs, nil
}

// isolateSuspects cuts a claim so that a row which was in a lease that
// expired while sending (crashes > 0) is leased alone: if it is the mail
// that kills the worker, it crashes alone and fails as poison after
// maxCrashes, instead of taking its batch-mates down with it each time.
// The rows cut off stay due and locked only until the claim commits.
func isolateSuspects(jobs []*job) []*job {
	i := slices.IndexFunc(jobs, func(j *job) bool { return j.crashes > 0 })
	switch {
	case i < 0:
		return jobs
	case i == 0:
		return jobs[:1]
	default:
		return jobs[:i]
	}
}

// pickQuery is the claim's SELECT for one status; it reads exactly the
// rows it returns from the (status, next_run, id) index.
func (q *Queue) pickQuery() string {
	return q.d.bounded(`SELECT ` + claimColumns + ` FROM ` + q.table +
		` WHERE status = ? AND next_run <= ? ORDER BY next_run, id LIMIT ?` + q.d.lockSkip())
}

// pickRows reads up to limit due rows of one status for the claim in tx.
func (q *Queue) pickRows(ctx context.Context, tx *sql.Tx, status int, now int64, limit int) ([]*job, error) {
	rows, err := tx.QueryContext(ctx, q.pickQuery(), status, now, limit)
	if err != nil {
		return nil, fmt.Errorf("queue: claim: picking %s rows: %w", StatusName(status), err)
	}
	defer rows.Close()
	var jobs []*job
	for rows.Next() {
		j := &job{}
		var maybe int
		var headers string
		m := &j.msg
		if err := rows.Scan(&j.id, &j.attempts, &j.maxAttempts, &j.crashes, &j.notAfter, &maybe, &j.createdAt, &m.MessageID,
			&m.From.Address, &m.From.Name, &m.To.Address, &m.To.Name, &m.ReplyTo.Address, &m.ReplyTo.Name,
			&m.Subject, &m.Text, &m.HTML, &headers); err != nil {
			return nil, fmt.Errorf("queue: claim: reading a row: %w", err)
		}
		j.maybeDelivered = maybe != 0
		if m.Headers, err = parseHeaders(headers); err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queue: claim: picking %s rows: %w", StatusName(status), err)
	}
	return jobs, nil
}

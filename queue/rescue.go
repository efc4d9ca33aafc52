package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

// errStoreSlow reports that the rescuer waited too long for its locks: the
// database was paused (a table lock, a long write transaction), and the
// owners of expired leases may not have had a chance to extend them.
var errStoreSlow = errors.New("queue: rescue: the database was slow to grant locks; rescuing nothing this time")

// rescue returns up to limit rows whose lease ended before now to pending
// or retry (or fails them, see evRescued in state.go): their worker died or
// hung while sending. It skips rows claimed under a token for which skip
// returns true (the caller's live leases, tokens recently blocked).
//
// It is one short transaction that locks the rows it reads, skipping rows
// others hold where the server can. A lease is rescued whole or not at
// all: if another session holds some of its rows, its owner may be alive
// and waiting behind that lock to renew it, so the token is returned in
// blocked instead. If getting the locks took longer than maxWait, it gives
// up and returns errStoreSlow: after a database pause the owners must get
// the first chance to renew their leases. It returns how many rows it
// rescued.
func (q *Queue) rescue(ctx context.Context, limit int, skip func(token string) bool, maxWait time.Duration) (rescued int, blocked []string, err error) {
	began := time.Now()
	now := q.clock.Now()
	// A plain read first: most of the time no lease has expired, and then
	// the rescuer takes no lock at all.
	var expired int
	if err := q.db.QueryRowContext(ctx, q.d.bounded(`SELECT COUNT(*) FROM (SELECT id FROM `+q.table+` WHERE `+statusIs(StatusSending)+
		` AND next_run < ? LIMIT 1) e`), now.UnixMilli()).Scan(&expired); err != nil {
		return 0, nil, fmt.Errorf("queue: rescue: looking for expired leases: %w", err)
	}
	if time.Since(began) > maxWait {
		return 0, nil, errStoreSlow
	}
	if expired == 0 {
		return 0, nil, nil
	}
	tx, done, err := q.beginWrite(ctx) // SQLite: BEGIN IMMEDIATE takes the write lock
	if err != nil {
		return 0, nil, fmt.Errorf("queue: rescue: begin: %w", err)
	}
	defer done()
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	jobs, err := q.expiredLeases(ctx, tx, now.UnixMilli(), limit)
	if err != nil {
		return 0, nil, err
	}
	if time.Since(began) > maxWait {
		return 0, nil, errStoreSlow
	}
	perToken := map[string]int{}
	for _, j := range jobs {
		perToken[j.token]++
	}
	whole := map[string]bool{}
	if !q.d.sqlite && len(perToken) > 0 { // SQLite has no row locks
		if whole, err = q.wholeLeases(ctx, tx, now.UnixMilli(), perToken); err != nil {
			return 0, nil, err
		}
	}
	cut := "" // the last lease may be cut by the limit: rescue it next time, whole
	if len(jobs) == limit && jobs[0].token != jobs[len(jobs)-1].token {
		cut = jobs[len(jobs)-1].token
	}
	var ups []rowUpdate
	for _, j := range jobs {
		switch {
		case skip != nil && skip(j.token), j.token == cut:
		case !q.d.sqlite && !whole[j.token]:
			if !slices.Contains(blocked, j.token) {
				blocked = append(blocked, j.token)
			}
		default:
			ups = append(ups, q.lane.Retry.next(j, event{kind: evRescued}, now))
		}
	}
	if len(ups) == 0 {
		return 0, blocked, tx.Commit()
	}
	n, err := q.writeRows(ctx, tx, ups, "next_run < ?", now.UnixMilli())
	if err != nil {
		return 0, nil, fmt.Errorf("queue: rescue: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, nil, fmt.Errorf("queue: rescue: commit: %w", err)
	}
	return n, blocked, nil
}

// expiredLeases reads and locks up to limit sending rows whose lease ended
// before now, skipping rows other sessions hold where the server can.
func (q *Queue) expiredLeases(ctx context.Context, tx *sql.Tx, now int64, limit int) ([]*job, error) {
	rows, err := tx.QueryContext(ctx, q.d.bounded(`SELECT id, attempts, max_attempts, crashes, not_after, maybe_delivered, locked_by FROM `+q.table+
		` WHERE `+statusIs(StatusSending)+` AND next_run < ? ORDER BY next_run, id LIMIT ?`+q.d.lockSkip()), now, limit)
	if err != nil {
		return nil, fmt.Errorf("queue: rescue: reading expired leases: %w", err)
	}
	defer rows.Close()
	var jobs []*job
	for rows.Next() {
		j := &job{}
		var maybe int
		if err := rows.Scan(&j.id, &j.attempts, &j.maxAttempts, &j.crashes, &j.notAfter, &maybe, &j.token); err != nil {
			return nil, fmt.Errorf("queue: rescue: reading a row: %w", err)
		}
		j.attempts++ // the attempt the lost lease stood for
		j.maybeDelivered = maybe != 0
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queue: rescue: reading expired leases: %w", err)
	}
	return jobs, nil
}

// wholeLeases reports for each token whether the rows locked (counted in
// locked) are all of its expired rows, by a plain read that sees the rows
// other sessions hold too.
func (q *Queue) wholeLeases(ctx context.Context, tx *sql.Tx, now int64, locked map[string]int) (map[string]bool, error) {
	args := []any{now}
	for token := range locked {
		args = append(args, token)
	}
	rows, err := tx.QueryContext(ctx, q.d.bounded(`SELECT locked_by, COUNT(*) FROM `+q.table+` WHERE `+statusIs(StatusSending)+
		` AND next_run < ? AND locked_by IN (`+placeholders(len(locked))+`) GROUP BY locked_by`), args...)
	if err != nil {
		return nil, fmt.Errorf("queue: rescue: counting expired leases: %w", err)
	}
	defer rows.Close()
	whole := map[string]bool{}
	for rows.Next() {
		var token string
		var n int
		if err := rows.Scan(&token, &n); err != nil {
			return nil, fmt.Errorf("queue: rescue: counting expired leases: %w", err)
		}
		whole[token] = n == locked[token]
	}
	return whole, rows.Err()
}

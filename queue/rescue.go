package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// errStoreSlow reports that the rescuer waited too long for its locks: the
// database was paused (a table lock, a long write transaction), and the
// owners of expired leases may not have had a chance to extend them.
var errStoreSlow = errors.New("queue: rescue: the database was slow to grant locks; rescuing nothing this time")

// rescue returns up to limit rows whose lease ended before now to pending
// or retry (or fails them, see evRescued in state.go): their worker died or
// hung while sending. It skips rows claimed under a token for which own
// returns true (the caller's live leases). It is one short transaction that
// locks the rows it reads (skipping rows others hold, where the server
// can); if getting those locks took longer than maxWait, it gives up and
// returns errStoreSlow, because after a database pause the owners must get
// the first chance to extend their leases. It returns how many rows it
// rescued.
func (q *Queue) rescue(ctx context.Context, limit int, own func(token string) bool, maxWait time.Duration) (int, error) {
	began := time.Now()
	now := q.clock.Now()
	var txOpts *sql.TxOptions
	if !q.d.sqlite {
		txOpts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	tx, err := q.db.BeginTx(ctx, txOpts) // SQLite: BEGIN IMMEDIATE takes the write lock
	if err != nil {
		return 0, fmt.Errorf("queue: rescue: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	rows, err := tx.QueryContext(ctx, q.d.bounded(`SELECT id, attempts, max_attempts, crashes, not_after, maybe_delivered, locked_by FROM `+q.table+
		` WHERE `+statusIs(StatusSending)+` AND next_run < ? ORDER BY next_run, id LIMIT ?`+q.d.lockSkip()), now.UnixMilli(), limit)
	if err != nil {
		return 0, fmt.Errorf("queue: rescue: reading expired leases: %w", err)
	}
	var jobs []*job
	for rows.Next() {
		j := &job{}
		var maybe int
		if err := rows.Scan(&j.id, &j.attempts, &j.maxAttempts, &j.crashes, &j.notAfter, &maybe, &j.token); err != nil {
			rows.Close()
			return 0, fmt.Errorf("queue: rescue: reading a row: %w", err)
		}
		j.attempts++ // the attempt the lost lease stood for
		j.maybeDelivered = maybe != 0
		if own == nil || !own(j.token) {
			jobs = append(jobs, j)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("queue: rescue: reading expired leases: %w", err)
	}
	if time.Since(began) > maxWait {
		return 0, errStoreSlow
	}
	if len(jobs) == 0 {
		return 0, tx.Commit()
	}
	ups := make([]rowUpdate, len(jobs))
	for i, j := range jobs {
		ups[i] = q.lane.Retry.next(j, event{kind: evRescued}, now)
	}
	n, err := q.writeRows(ctx, tx, ups, "next_run < ?", now.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("queue: rescue: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("queue: rescue: commit: %w", err)
	}
	return n, nil
}

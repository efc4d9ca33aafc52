package queue

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Retention says how long finished rows are kept. Zero fields take the
// defaults shown.
type Retention struct {
	Sent   time.Duration // default 30 days
	Failed time.Duration // default 90 days (kept longer: they are what gets investigated)
	Batch  int           // rows per DELETE, default 500
	Pause  time.Duration // between batches, default 100ms
}

func (r Retention) withDefaults() Retention {
	if r.Sent == 0 {
		r.Sent = 30 * 24 * time.Hour
	}
	if r.Failed == 0 {
		r.Failed = 90 * 24 * time.Hour
	}
	if r.Batch <= 0 {
		r.Batch = 500
	}
	if r.Pause == 0 {
		r.Pause = 100 * time.Millisecond
	}
	return r
}

// Cleanup deletes sent rows older than r.Sent and failed rows older than
// r.Failed (by the time they finished), in batches of r.Batch with r.Pause
// between them, so that no DELETE is a large transaction; it never touches
// rows that are pending, retrying or sending. It also drops rate-limit
// counters that can no longer matter. progress, if not nil, is called after
// each batch with the running total. It returns the rows deleted.
func (q *Queue) Cleanup(ctx context.Context, r Retention, progress func(deleted int64)) (int64, error) {
	r = r.withDefaults()
	now := q.clock.Now()
	var total int64
	for _, c := range []struct {
		status int
		cutoff time.Time
	}{{StatusSent, now.Add(-r.Sent)}, {StatusFailed, now.Add(-r.Failed)}} {
		for {
			n, err := q.cleanupBatch(ctx, c.status, c.cutoff.UnixMilli(), r.Batch)
			total += n
			if err != nil {
				return total, err
			}
			if n > 0 && progress != nil {
				progress(total)
			}
			if n < int64(r.Batch) {
				break
			}
			select {
			case <-ctx.Done():
				return total, ctx.Err()
			case <-time.After(r.Pause):
			}
		}
	}
	// Counters older than two windows of the longest limit are never read.
	horizon := 2 * max(q.lane.RecipientLimit.Per, q.lane.IPLimit.Per, time.Hour)
	if _, err := q.db.ExecContext(ctx, q.d.bounded(`DELETE FROM `+q.limits+` WHERE window_start < ?`), now.Add(-horizon).UnixMilli()); err != nil {
		return total, fmt.Errorf("queue: cleanup of rate-limit counters: %w", err)
	}
	return total, nil
}

// CountOld counts the rows Cleanup with r would delete now: sent rows
// older than r.Sent and failed rows older than r.Failed.
func (q *Queue) CountOld(ctx context.Context, r Retention) (int64, error) {
	r = r.withDefaults()
	now := q.clock.Now()
	var n int64
	err := q.db.QueryRowContext(ctx, q.d.bounded(`SELECT COUNT(*) FROM `+q.table+` WHERE (status = ? AND next_run < ?) OR (status = ? AND next_run < ?)`),
		StatusSent, now.Add(-r.Sent).UnixMilli(), StatusFailed, now.Add(-r.Failed).UnixMilli()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("queue: counting old rows: %w", err)
	}
	return n, nil
}

// cleanupBatch deletes up to batch rows in status that finished before
// cutoff, with their attachments and (SQLite) their bodies, and returns how
// many it deleted.
//
// The candidates are read first without a lock. In the transaction that
// deletes them, the rows are taken under their lock and checked again
// (status and cutoff), and the files and bodies deleted are exactly those
// of the rows deleted: a row an operator's Retry took back to pending
// meanwhile keeps everything it needs to be sent. On PostgreSQL and SQLite
// the rows' DELETE names them (RETURNING); on MySQL a SELECT ... FOR UPDATE
// locks them first. (A subselect in the files' DELETE would not do: on
// PostgreSQL it takes no lock, so a Retry committing between it and the
// rows' DELETE kept its row and lost its files.)
func (q *Queue) cleanupBatch(ctx context.Context, status int, cutoff int64, batch int) (int64, error) {
	rows, err := q.db.QueryContext(ctx, q.d.bounded(`SELECT id FROM `+q.table+` WHERE status = ? AND next_run < ? ORDER BY next_run LIMIT ?`), status, cutoff, batch)
	if err != nil {
		return 0, fmt.Errorf("queue: cleanup: %w", err)
	}
	var ids []any
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, fmt.Errorf("queue: cleanup: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(ids) == 0 {
		return 0, err
	}

	tx, done, err := q.beginWrite(ctx)
	if err != nil {
		return 0, fmt.Errorf("queue: cleanup: begin: %w", err)
	}
	defer done()
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	deleted, err := q.deleteOld(ctx, tx, ids, status, cutoff)
	if err != nil {
		return 0, err
	}
	var withFiles, bodies []any
	for _, d := range deleted {
		if d.files > 0 {
			withFiles = append(withFiles, d.id)
		}
		if d.body != 0 {
			bodies = append(bodies, d.body)
		}
	}
	if len(bodies) > 0 {
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+q.bodies+` WHERE id IN (`+placeholders(len(bodies))+`)`, bodies...); err != nil {
			return 0, fmt.Errorf("queue: cleanup of mail bodies: %w", err)
		}
	}
	if len(withFiles) > 0 {
		if _, err := tx.ExecContext(ctx, q.d.bounded(`DELETE FROM `+q.files+` WHERE mail_id IN (`+placeholders(len(withFiles))+`)`), withFiles...); err != nil {
			return 0, fmt.Errorf("queue: cleanup of attachments: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("queue: cleanup: commit: %w", err)
	}
	return int64(len(deleted)), nil
}

// oldRow is a row cleanupBatch deleted: its id, its count of files and
// (SQLite) the id of its bodies, 0 when they are inline.
type oldRow struct {
	id, body int64
	files    int
}

// deleteOld deletes, in tx, those of ids that are still in status and
// finished before cutoff, and returns them.
func (q *Queue) deleteOld(ctx context.Context, tx *sql.Tx, ids []any, status int, cutoff int64) ([]oldRow, error) {
	cols, cond := `id, attachments, 0`, ` WHERE id IN (`+placeholders(len(ids))+`) AND status = ? AND next_run < ?`
	if q.d.sqlite {
		cols = `id, attachments, body_id`
	}
	args := append(ids[:len(ids):len(ids)], status, cutoff)
	if q.d.sqlite || q.d.postgres {
		rows, err := tx.QueryContext(ctx, q.d.bounded(`DELETE FROM `+q.table+cond+` RETURNING `+cols), args...)
		if err != nil {
			return nil, fmt.Errorf("queue: cleanup: %w", err)
		}
		return scanOld(rows)
	}
	// MySQL has no DELETE ... RETURNING: the rows are locked and read
	// first, then deleted by id (their lock keeps them as they were read).
	rows, err := tx.QueryContext(ctx, q.d.bounded(`SELECT `+cols+` FROM `+q.table+cond+` FOR UPDATE`), args...)
	if err != nil {
		return nil, fmt.Errorf("queue: cleanup: %w", err)
	}
	old, err := scanOld(rows)
	if err != nil || len(old) == 0 {
		return nil, err
	}
	locked := make([]any, len(old))
	for i, o := range old {
		locked[i] = o.id
	}
	if _, err := tx.ExecContext(ctx, q.d.bounded(`DELETE FROM `+q.table+` WHERE id IN (`+placeholders(len(locked))+`)`), locked...); err != nil {
		return nil, fmt.Errorf("queue: cleanup: %w", err)
	}
	return old, nil
}

func scanOld(rows *sql.Rows) ([]oldRow, error) {
	defer rows.Close()
	var old []oldRow
	for rows.Next() {
		var o oldRow
		if err := rows.Scan(&o.id, &o.files, &o.body); err != nil {
			return nil, fmt.Errorf("queue: cleanup: %w", err)
		}
		old = append(old, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queue: cleanup: %w", err)
	}
	return old, nil
}

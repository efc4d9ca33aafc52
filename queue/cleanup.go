package queue

import (
	"context"
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
	var n int64
	err = q.write(ctx, func(db execer) error {
		if q.d.sqlite {
			// The rows' bodies first, while the rows still name them.
			if _, err := db.ExecContext(ctx, `DELETE FROM `+q.bodies+` WHERE id IN (SELECT body_id FROM `+q.table+` WHERE id IN (`+placeholders(len(ids))+`) AND status = ? AND body_id <> 0)`, append(ids, status)...); err != nil {
				return fmt.Errorf("queue: cleanup of mail bodies: %w", err)
			}
		}
		// The attachments too, of the rows that are still in this status.
		if _, err := db.ExecContext(ctx, q.d.bounded(`DELETE FROM `+q.files+` WHERE mail_id IN (SELECT id FROM `+q.table+` WHERE id IN (`+placeholders(len(ids))+`) AND status = ? AND attachments > 0)`), append(ids, status)...); err != nil {
			return fmt.Errorf("queue: cleanup of attachments: %w", err)
		}
		res, err := db.ExecContext(ctx, q.d.bounded(`DELETE FROM `+q.table+` WHERE id IN (`+placeholders(len(ids))+`) AND status = ?`), append(ids, status)...)
		if err != nil {
			return fmt.Errorf("queue: cleanup: %w", err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return n, err
}

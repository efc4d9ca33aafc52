package queue

import (
	"context"
	"fmt"

	"github.com/mailspool/mailspool/transport"
)

// resumeDeferred makes the retry rows that connection failures put off
// due now: called when the provider answers again after an outage, so the
// mail it held up goes out at once instead of at the end of the longer
// connection schedule. It works in batches of maxBatchRows and returns how
// many rows it moved.
func (q *Queue) resumeDeferred(ctx context.Context) (int64, error) {
	now := q.now()
	var total int64
	after := now // keyset: next_run of the last row seen
	for {
		rows, err := q.db.QueryContext(ctx, q.d.bounded(`SELECT id, next_run FROM `+q.table+
			` WHERE `+statusIs(StatusRetry)+` AND next_run > ? AND last_kind = ? ORDER BY next_run LIMIT ?`), after, transport.Connection.String(), maxBatchRows)
		if err != nil {
			return total, fmt.Errorf("queue: resuming deferred mail: %w", err)
		}
		var ids []any
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id, &after); err != nil {
				rows.Close()
				return total, fmt.Errorf("queue: resuming deferred mail: %w", err)
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(ids) == 0 {
			return total, err
		}
		res, err := q.db.ExecContext(ctx, q.d.bounded(`UPDATE `+q.table+` SET next_run = ? WHERE id IN (`+placeholders(len(ids))+`) AND `+statusIs(StatusRetry)),
			append([]any{now}, ids...)...)
		if err != nil {
			return total, fmt.Errorf("queue: resuming deferred mail: %w", err)
		}
		n, _ := res.RowsAffected()
		total += n
		if len(ids) < maxBatchRows {
			return total, nil
		}
		// Rows with the same next_run as the last one may be left for the
		// next batch: step back one millisecond so none is skipped.
		after--
	}
}

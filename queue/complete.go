package queue

import (
	"context"
	"fmt"
	"strings"
)

// maxBatchRows bounds the rows one completion statement names.
const maxBatchRows = 500

// complete writes the outcomes of a batch claimed under token, in as few
// statements as the batch size allows (one per maxBatchRows). It is fenced:
// a row is only written while it is still in sending with locked_by =
// token, so a worker whose lease expired and was taken over changes nothing.
// It returns how many rows were written; the rest were stale.
func (q *Queue) complete(ctx context.Context, token string, ups []rowUpdate) (int, error) {
	applied := 0
	for len(ups) > 0 {
		chunk := ups[:min(len(ups), maxBatchRows)]
		ups = ups[len(chunk):]
		n, err := q.completeChunk(ctx, token, chunk)
		applied += n
		if err != nil {
			return applied, err
		}
	}
	return applied, nil
}

func (q *Queue) completeChunk(ctx context.Context, token string, ups []rowUpdate) (int, error) {
	var b strings.Builder
	var args []any
	b.WriteString(`UPDATE ` + q.table + ` SET locked_by = '', locked_until = 0`)
	// setCase appends "col = CASE id WHEN ? THEN ? ... ELSE col END" for
	// the rows where include says the column changes.
	setCase := func(col string, include func(u *rowUpdate) bool, value func(u *rowUpdate) any) {
		first := true
		for i := range ups {
			u := &ups[i]
			if !include(u) {
				continue
			}
			if first {
				b.WriteString(", " + col + " = CASE id")
				first = false
			}
			b.WriteString(" WHEN ? THEN ?")
			args = append(args, u.id, value(u))
		}
		if !first {
			b.WriteString(" ELSE " + col + " END")
		}
	}
	all := func(*rowUpdate) bool { return true }
	failed := func(u *rowUpdate) bool { return u.status != StatusSent }
	setCase("status", all, func(u *rowUpdate) any { return u.status })
	setCase("attempts", all, func(u *rowUpdate) any { return u.attempts })
	setCase("next_run", all, func(u *rowUpdate) any { return u.nextRun })
	setCase("last_kind", all, func(u *rowUpdate) any { return u.lastKind })
	setCase("maybe_delivered", all, func(u *rowUpdate) any { return boolInt(u.maybeDelivered) })
	setCase("sent_at", func(u *rowUpdate) bool { return u.status == StatusSent }, func(u *rowUpdate) any { return u.sentAt })
	setCase("provider_id", func(u *rowUpdate) bool { return u.status == StatusSent }, func(u *rowUpdate) any { return u.providerID })
	setCase("last_code", failed, func(u *rowUpdate) any { return u.lastCode })
	setCase("last_error", failed, func(u *rowUpdate) any { return u.lastError })
	setCase("last_rule", failed, func(u *rowUpdate) any { return u.lastRule })

	b.WriteString(` WHERE id IN (` + placeholders(len(ups)) + `) AND status = 1 AND locked_by = ?`)
	for _, u := range ups {
		args = append(args, u.id)
	}
	args = append(args, token)
	res, err := q.db.ExecContext(ctx, q.d.bounded(b.String()), args...)
	if err != nil {
		return 0, fmt.Errorf("queue: recording %d outcomes: %w", len(ups), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("queue: recording outcomes: rows affected: %w", err)
	}
	return int(n), nil
}

// release gives claimed rows back without counting their attempt: they
// become due at nextRun (unix ms), pending again if they had never been
// tried. Fenced like complete. It returns how many rows were released.
func (q *Queue) release(ctx context.Context, token string, ids []int64, nextRun int64) (int, error) {
	released := 0
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), maxBatchRows)]
		ids = ids[len(chunk):]
		args := []any{nextRun}
		for _, id := range chunk {
			args = append(args, id)
		}
		args = append(args, token)
		stmt := `UPDATE ` + q.table + ` SET status = CASE WHEN attempts <= 1 THEN 0 ELSE 3 END, attempts = attempts - 1,
  locked_by = '', locked_until = 0, next_run = ? WHERE id IN (` + placeholders(len(chunk)) + `) AND status = 1 AND locked_by = ?`
		res, err := q.db.ExecContext(ctx, q.d.bounded(stmt), args...)
		if err != nil {
			return released, fmt.Errorf("queue: releasing %d rows: %w", len(chunk), err)
		}
		n, _ := res.RowsAffected()
		released += int(n)
	}
	return released, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

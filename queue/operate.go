package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mailspool/mailspool/internal/textclip"
)

// ErrWrongState matches the error for a mail that an operator action does
// not apply to in its current state (retrying a mail being sent, cancelling
// one already sent).
var ErrWrongState = errors.New("queue: mail is in the wrong state")

// kindCancelled is stored in last_kind for mail an operator cancelled.
const kindCancelled = "cancelled"

// maxHistory is the size of the history column; the oldest lines go first.
const maxHistory = 1024

// action is an operator action on single rows.
type action struct {
	name  string       // in the history line
	from  map[int]bool // the statuses it applies to
	set   string       // the SET clause; its first ? is now (unix ms)
	extra []any        // arguments after now
}

var retryAction = action{
	name: "retry",
	from: map[int]bool{StatusRetry: true, StatusFailed: true},
	set:  `status = 0, attempts = 0, crashes = 0, next_run = ?, not_after = 0, locked_by = '', locked_until = 0`,
}

var cancelAction = action{
	name:  "cancel",
	from:  map[int]bool{StatusPending: true, StatusRetry: true},
	set:   `status = 4, next_run = ?, last_kind = ?, last_code = 0, last_rule = '', last_scope = '', last_error = ?`,
	extra: []any{kindCancelled, "cancelled by an operator"},
}

// Retry gives each failed or retry mail among ids fresh attempts: it
// becomes pending and due now, with its attempts and crashes at 0 and its
// not-after deadline dropped; its last outcome stays until the next attempt, and a
// line saying what it was is added to its history. It returns how many
// mails it retried; ids that are not found or not failed/retry (a mail
// being sent, already sent, or still pending) are left alone and named in
// the error, which matches ErrNotFound or ErrWrongState.
func (q *Queue) Retry(ctx context.Context, ids ...int64) (int64, error) {
	return q.act(ctx, retryAction, ids, false)
}

// WouldRetry is Retry without the change: it returns how many of ids
// Retry would retry now, and the same error for the others.
func (q *Queue) WouldRetry(ctx context.Context, ids ...int64) (int64, error) {
	return q.act(ctx, retryAction, ids, true)
}

// Cancel fails each pending or retry mail among ids as cancelled, with a
// history line: it will not be sent. A mail being sent is refused (its
// outcome is on its way), as are finished ones; they are named in the
// error, as are ids not found. It returns how many mails it cancelled.
func (q *Queue) Cancel(ctx context.Context, ids ...int64) (int64, error) {
	return q.act(ctx, cancelAction, ids, false)
}

// WouldCancel is Cancel without the change: it returns how many of ids
// Cancel would cancel now, and the same error for the others.
func (q *Queue) WouldCancel(ctx context.Context, ids ...int64) (int64, error) {
	return q.act(ctx, cancelAction, ids, true)
}

// RetryFailed retries (as Retry does) every failed mail that matches f,
// whose Status is ignored, in batches, and returns how many it retried.
func (q *Queue) RetryFailed(ctx context.Context, f Filter) (int64, error) {
	f.Status = StatusName(StatusFailed)
	cond, args, err := q.where(f)
	if err != nil {
		return 0, err
	}
	var total int64
	var after int64
	for {
		ids, err := q.ids(ctx, `SELECT id FROM `+q.table+` WHERE `+cond+` AND id > ? ORDER BY id LIMIT ?`, append(args, after, maxBatchRows)...)
		if err != nil || len(ids) == 0 {
			return total, err
		}
		n, err := q.act(ctx, retryAction, ids, false)
		total += n
		// A row that changed since the SELECT is skipped, not an error.
		if err != nil && !errors.Is(err, ErrWrongState) {
			return total, err
		}
		if len(ids) < maxBatchRows {
			return total, nil
		}
		after = ids[len(ids)-1]
	}
}

func (q *Queue) ids(ctx context.Context, query string, args ...any) ([]int64, error) {
	rows, err := q.db.QueryContext(ctx, q.d.bounded(query), args...)
	if err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("queue: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// act applies a to ids in batches, one transaction each; dry only counts
// the mails it would apply to.
func (q *Queue) act(ctx context.Context, a action, ids []int64, dry bool) (int64, error) {
	var total int64
	var errs []error
	for len(ids) > 0 {
		batch := ids[:min(len(ids), maxBatchRows)]
		ids = ids[len(batch):]
		n, refused, err := q.actBatch(ctx, a, batch, dry)
		total += n
		if err != nil {
			return total, err
		}
		errs = append(errs, refused...)
	}
	return total, errors.Join(errs...)
}

func (q *Queue) actBatch(ctx context.Context, a action, ids []int64, dry bool) (int64, []error, error) {
	tx, err := q.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("queue: %s: %w", a.name, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	lock := ""
	if !q.d.sqlite && !dry {
		lock = " FOR UPDATE"
	}
	rows, err := tx.QueryContext(ctx, q.d.bounded(`SELECT id, status, attempts, max_attempts, last_kind, last_code, history FROM `+q.table+
		` WHERE id IN (`+placeholders(len(ids))+`)`+lock), args...)
	if err != nil {
		return 0, nil, fmt.Errorf("queue: %s: %w", a.name, err)
	}
	type current struct {
		status, attempts, maxAttempts, code int
		kind, history                       string
	}
	found := map[int64]current{}
	for rows.Next() {
		var id int64
		var c current
		if err := rows.Scan(&id, &c.status, &c.attempts, &c.maxAttempts, &c.kind, &c.code, &c.history); err != nil {
			rows.Close()
			return 0, nil, fmt.Errorf("queue: %s: %w", a.name, err)
		}
		found[id] = c
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("queue: %s: %w", a.name, err)
	}
	now := q.clock.Now()
	var n int64
	var refused []error
	for _, id := range ids {
		c, ok := found[id]
		switch {
		case !ok:
			refused = append(refused, q.notFound(id))
			continue
		case !a.from[c.status]:
			refused = append(refused, fmt.Errorf("%w: mail %d is %s, not %s", ErrWrongState, id, StatusName(c.status), a.states()))
			continue
		case dry:
			n++
			continue
		}
		line := fmt.Sprintf("%s %s: was %s, %d of %d attempts", now.UTC().Format(time.RFC3339), a.name, StatusName(c.status), c.attempts, c.maxAttempts)
		if kind := strings.TrimSpace(c.kind); kind != "" {
			line += ", last " + kind
			if c.code != 0 {
				line += fmt.Sprintf(" %d", c.code)
			}
		}
		stmtArgs := append(append([]any{now.UnixMilli()}, a.extra...), appendHistory(c.history, line), id, c.status)
		res, err := tx.ExecContext(ctx, q.d.bounded(`UPDATE `+q.table+` SET `+a.set+`, history = ? WHERE id = ? AND status = ?`), stmtArgs...)
		if err != nil {
			return 0, nil, fmt.Errorf("queue: %s mail %d: %w", a.name, id, err)
		}
		affected, _ := res.RowsAffected()
		n += affected
	}
	if dry {
		return n, refused, nil // the deferred Rollback ends the read
	}
	if err := tx.Commit(); err != nil {
		return 0, nil, fmt.Errorf("queue: %s: commit: %w", a.name, err)
	}
	return n, refused, nil
}

// states names the statuses a applies to.
func (a action) states() string {
	var names []string
	for s := StatusPending; s <= StatusFailed; s++ {
		if a.from[s] {
			names = append(names, StatusName(s))
		}
	}
	return strings.Join(names, " or ")
}

// appendHistory adds line to history, dropping the oldest lines to stay
// within maxHistory bytes.
func appendHistory(history, line string) string {
	lines := strings.Split(history, "\n")
	if history == "" {
		lines = nil
	}
	lines = append(lines, textclip.Prefix(line, maxHistory))
	for len(strings.Join(lines, "\n")) > maxHistory {
		lines = lines[1:]
	}
	return strings.Join(lines, "\n")
}

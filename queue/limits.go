package queue

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/mailspool/mailspool/transport"
)

// ErrRateLimited matches (errors.Is) every *RateLimitError.
var ErrRateLimited = errors.New("queue: rate limit exceeded")

// RateLimitError reports an enqueue refused by a lane's rate limit. The
// caller should answer "try again later" (e.g. HTTP 429 with RetryAfter).
type RateLimitError struct {
	Limit      string // "recipient" or "client IP"
	Max        int
	Per        time.Duration
	RetryAfter time.Duration // when the limit will allow one more; at most Per
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("queue: %s rate limit exceeded (%d per %v); try again in %v", e.Limit, e.Max, e.Per, e.RetryAfter.Round(time.Second))
}

// Is reports whether target is ErrRateLimited.
func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimited }

// countLimits counts this enqueue against the lane's limits that apply, in
// the caller's transaction, and refuses it when a limit is exceeded. It
// returns undo, which takes the counts back (nil when no limit applies).
//
// Each limit is a sliding window approximated from two fixed windows (the
// current one and the previous one weighted by how much of it still
// overlaps the last Per). A limited subject has one counter row holding
// both windows' counts (schema version 7). One upsert counts the enqueue in
// every limit that applies, moving a row to the current window when its
// window has passed, and, where the store has INSERT ... RETURNING
// (SQLite, MariaDB), returns the counts; elsewhere (MySQL, or a DBTX
// without QueryContext) one read of the same rows follows. The upsert
// locks the counter rows and nothing else: concurrent enqueues for the same
// recipient queue up on that lock instead of all passing a COUNT(*), a
// rolled-back enqueue takes its count with it, and the undo of a refused
// (or failed) enqueue cannot wait for a lock, so the caller's transaction
// needs no savepoint to forget it.
func (q *Queue) countLimits(ctx context.Context, exec DBTX, m *transport.Message, o *enqueueOptions, now time.Time) (undo func() error, err error) {
	type counted struct {
		what      string
		key       string
		l         Limit
		window    int64
		cur, prev int
	}
	var cs []*counted
	add := func(what, subject string, l Limit) {
		sum := sha256.Sum256([]byte(subject))
		per := l.Per.Milliseconds()
		cs = append(cs, &counted{what: what, key: hex.EncodeToString(sum[:]), l: l, window: now.UnixMilli() / per * per})
	}
	if l := q.lane.RecipientLimit; !l.off() {
		add("recipient", "rcpt:"+recipientKey(m.To.Address), l)
	}
	if l := q.lane.IPLimit; o.clientIP != "" && !l.off() {
		add("client IP", "ip:"+o.clientIP, l)
	}
	if len(cs) == 0 {
		return nil, nil
	}

	// A row still in this window (or, from a host whose clock is ahead, in
	// a later one) counts one more; a row whose window has passed starts
	// this one, keeping its count as the previous window's when that was
	// the window just before. The assignments read the old row: SQLite
	// evaluates them all on it, MySQL left to right, so window_start,
	// which the others read, is assigned last.
	var upsert strings.Builder
	var args, keys []any
	upsert.WriteString(`INSERT INTO ` + q.limits + ` (lkey, window_start, n, prev_n) VALUES `)
	// old names a column of the stored row. PostgreSQL wants it
	// qualified (excluded has the same columns) and the type of the
	// per-limit windows spelled out.
	old, perType := func(col string) string { return col }, "?"
	if q.d.postgres {
		old, perType = func(col string) string { return q.limits + "." + col }, "CAST(? AS BIGINT)"
	}
	perOf := "CASE " + old("lkey")
	var perArgs []any
	for i, c := range cs {
		if i > 0 {
			upsert.WriteString(", ")
		}
		upsert.WriteString("(?, ?, 1, 0)")
		args = append(args, c.key, c.window)
		keys = append(keys, c.key)
		perOf += " WHEN ? THEN " + perType
		perArgs = append(perArgs, c.key, c.l.Per.Milliseconds())
	}
	perOf += " END"
	newWindow, stored := "VALUES(window_start)", old("window_start")
	if q.d.sqlite || q.d.postgres {
		newWindow = "excluded.window_start"
		upsert.WriteString(` ON CONFLICT (lkey) DO UPDATE SET`)
	} else {
		upsert.WriteString(` ON DUPLICATE KEY UPDATE`)
	}
	upsert.WriteString(` prev_n = CASE WHEN ` + newWindow + ` <= ` + stored + ` THEN ` + old("prev_n") + ` WHEN ` + stored + ` = ` + newWindow + ` - (` + perOf + `) THEN ` + old("n") + ` ELSE 0 END,
  n = CASE WHEN ` + newWindow + ` <= ` + stored + ` THEN ` + old("n") + ` + 1 ELSE 1 END,
  window_start = CASE WHEN ` + newWindow + ` <= ` + stored + ` THEN ` + stored + ` ELSE ` + newWindow + ` END`)
	args = append(args, perArgs...)

	querier, returning := exec.(interface {
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	})
	returning = returning && q.d.returning
	var counts map[string][2]int
	if returning {
		upsert.WriteString(` RETURNING lkey, n, prev_n`)
		counts, err = readCounts(querier.QueryContext(ctx, q.d.lockBounded(upsert.String(), q.lockWait), args...))
	} else {
		_, err = exec.ExecContext(ctx, q.d.lockBounded(upsert.String(), q.lockWait), args...)
	}
	if err != nil {
		if lerr := q.lockError(err); lerr != err {
			return nil, lerr
		}
		return nil, fmt.Errorf("queue: enqueue: counting the %s limit: %w", cs[0].what, err)
	}
	in := "lkey IN (" + placeholders(len(keys)) + ")"
	undo = func() error {
		_, err := exec.ExecContext(context.WithoutCancel(ctx), q.d.rebind(`UPDATE `+q.limits+` SET n = n - 1 WHERE `+in), keys...)
		if err != nil {
			return fmt.Errorf("queue: enqueue: taking back the rate-limit counts (roll the transaction back): %w", err)
		}
		return nil
	}
	if !returning {
		// Our own upsert is visible to us, and the rows are ours until
		// the transaction ends.
		if counts, err = q.readCountRow(ctx, exec, keys); err != nil {
			return nil, errors.Join(fmt.Errorf("queue: enqueue: reading the rate-limit counters: %w", err), undo())
		}
	}
	for _, c := range cs {
		got, ok := counts[c.key]
		if !ok {
			return nil, errors.Join(fmt.Errorf("queue: enqueue: the %s limit's counter was not returned", c.what), undo())
		}
		c.cur, c.prev = got[0], got[1]
	}
	for _, c := range cs {
		per := c.l.Per.Milliseconds()
		nowMS := now.UnixMilli()
		overlap := 1 - float64(nowMS-c.window)/float64(per)
		if estimate := float64(c.prev)*overlap + float64(c.cur); estimate <= float64(c.l.N)+1e-9 {
			continue
		}
		// The estimate can point past the window; by then every mail
		// counted here has slid out of it, so Per is always enough.
		retry := min(limitRetryAfter(c.prev, c.cur, c.l.N, nowMS, c.window, per), c.l.Per)
		refused := &RateLimitError{Limit: c.what, Max: c.l.N, Per: c.l.Per, RetryAfter: retry}
		if err := undo(); err != nil {
			return nil, errors.Join(refused, err)
		}
		return nil, refused
	}
	return undo, nil
}

// readCounts collects the rows of "lkey, n, prev_n": each counter's current
// and previous window's counts by key.
func readCounts(rows *sql.Rows, err error) (map[string][2]int, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	counts := map[string][2]int{}
	for rows.Next() {
		var key string
		var cur, prev int
		if err := rows.Scan(&key, &cur, &prev); err != nil {
			return nil, err
		}
		counts[key] = [2]int{cur, prev}
	}
	return counts, rows.Err()
}

// readCountRow reads the counters of keys through a DBTX, which only has
// QueryRowContext: in one row, each key's n (-1 when it has no row) and
// prev_n.
func (q *Queue) readCountRow(ctx context.Context, exec DBTX, keys []any) (map[string][2]int, error) {
	var b strings.Builder
	b.WriteString("SELECT ")
	var args []any
	vals := make([][2]int, len(keys))
	dst := make([]any, 0, 2*len(keys))
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("COALESCE(MAX(CASE WHEN lkey = ? THEN n END), -1), COALESCE(MAX(CASE WHEN lkey = ? THEN prev_n END), 0)")
		args = append(args, k, k)
		dst = append(dst, &vals[i][0], &vals[i][1])
	}
	b.WriteString(" FROM " + q.limits + " WHERE lkey IN (" + placeholders(len(keys)) + ")")
	if err := exec.QueryRowContext(ctx, q.d.rebind(b.String()), append(args, keys...)...).Scan(dst...); err != nil {
		return nil, err
	}
	counts := map[string][2]int{}
	for i, k := range keys {
		if vals[i][0] >= 0 {
			counts[k.(string)] = vals[i]
		}
	}
	return counts, nil
}

// limitRetryAfter estimates when one more enqueue will fit: cur counts the
// refused enqueue, so cur-1 are really there.
func limitRetryAfter(prev, cur, limit int, nowMS, window, per int64) time.Duration {
	have := cur - 1
	if prev > 0 && have < limit {
		// Within this window, once the previous window's weight has dropped
		// enough: prev*(1-f) + have + 1 <= limit.
		f := 1 - float64(limit-have-1)/float64(prev)
		at := window + int64(math.Ceil(f*float64(per)))
		if at > nowMS {
			return time.Duration(at-nowMS) * time.Millisecond
		}
	}
	// In the next window, this window becomes the previous one:
	// have*(1-f) + 1 <= limit.
	f := 0.0
	if have > 0 {
		f = max(0, 1-float64(limit-1)/float64(have))
	}
	at := window + per + int64(math.Ceil(f*float64(per)))
	return time.Duration(max(at-nowMS, 1000)) * time.Millisecond
}

package queue

import (
	"context"
	"crypto/sha256"
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
// overlaps the last Per). One upsert bumps the current window of every
// limit that applies, and one read gets both windows of each: three
// statements in all with the refusal's undo, however many limits apply. The
// upsert locks the counter rows: concurrent enqueues for the same recipient
// queue up on that lock instead of all passing a COUNT(*), a rolled-back
// enqueue takes its count with it, and the undo of a refused (or failed)
// enqueue cannot wait for a lock, so the caller's transaction needs no
// savepoint to forget it.
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
		add("recipient", "rcpt:"+normalizeAddr(m.To.Address), l)
	}
	if l := q.lane.IPLimit; o.clientIP != "" && !l.off() {
		add("client IP", "ip:"+o.clientIP, l)
	}
	if len(cs) == 0 {
		return nil, nil
	}

	var upsert, match strings.Builder
	var upArgs, readArgs, undoArgs []any
	upsert.WriteString(`INSERT INTO ` + q.limits + ` (lkey, window_start, n) VALUES `)
	for i, c := range cs {
		if i > 0 {
			upsert.WriteString(", ")
			match.WriteString(" OR ")
		}
		upsert.WriteString("(?, ?, 1)")
		match.WriteString("(lkey = ? AND window_start IN (?, ?))")
		per := c.l.Per.Milliseconds()
		upArgs = append(upArgs, c.key, c.window)
		readArgs = append(readArgs, c.key, c.window, c.window-per)
	}
	if q.d.sqlite {
		upsert.WriteString(` ON CONFLICT (lkey, window_start) DO UPDATE SET n = n + 1`)
	} else {
		upsert.WriteString(` ON DUPLICATE KEY UPDATE n = n + 1`)
	}
	if _, err := exec.ExecContext(ctx, q.d.lockBounded(upsert.String(), q.lockWait), upArgs...); err != nil {
		if lerr := q.lockError(err); lerr != err {
			return nil, lerr
		}
		return nil, fmt.Errorf("queue: enqueue: counting the %s limit: %w", cs[0].what, err)
	}
	undo = func() error {
		var where strings.Builder
		undoArgs = undoArgs[:0]
		for i, c := range cs {
			if i > 0 {
				where.WriteString(" OR ")
			}
			where.WriteString("(lkey = ? AND window_start = ?)")
			undoArgs = append(undoArgs, c.key, c.window)
		}
		_, err := exec.ExecContext(context.WithoutCancel(ctx), `UPDATE `+q.limits+` SET n = n - 1 WHERE `+where.String(), undoArgs...)
		if err != nil {
			return fmt.Errorf("queue: enqueue: taking back the rate-limit counts (roll the transaction back): %w", err)
		}
		return nil
	}

	// Our own upsert is visible to us; the previous window no longer
	// changes. One row: the current and previous count of each limit.
	var read strings.Builder
	var sumArgs []any
	read.WriteString("SELECT ")
	dst := make([]any, 0, 2*len(cs))
	for i, c := range cs {
		if i > 0 {
			read.WriteString(", ")
		}
		read.WriteString("COALESCE(SUM(CASE WHEN lkey = ? AND window_start = ? THEN n END), 0), COALESCE(SUM(CASE WHEN lkey = ? AND window_start = ? THEN n END), 0)")
		sumArgs = append(sumArgs, c.key, c.window, c.key, c.window-c.l.Per.Milliseconds())
		dst = append(dst, &c.cur, &c.prev)
	}
	read.WriteString(" FROM " + q.limits + " WHERE " + match.String())
	if err := exec.QueryRowContext(ctx, read.String(), append(sumArgs, readArgs...)...).Scan(dst...); err != nil {
		return nil, errors.Join(fmt.Errorf("queue: enqueue: reading the rate-limit counters: %w", err), undo())
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

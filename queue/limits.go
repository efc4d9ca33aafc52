package queue

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
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

// countLimits counts this enqueue against the lane's limits, in the
// caller's transaction, and refuses it when a limit is exceeded.
//
// Each limit is a sliding window approximated from two fixed windows (the
// current one and the previous one weighted by how much of it still
// overlaps the last Per). The counter rows are bumped with an upsert, which
// locks the row: concurrent enqueues for the same recipient queue up on that
// lock instead of all passing a COUNT(*), and a rolled-back enqueue takes its
// count with it.
func (q *Queue) countLimits(ctx context.Context, exec DBTX, m *transport.Message, o *enqueueOptions, now time.Time) error {
	if l := q.lane.RecipientLimit; !l.off() {
		if err := q.bump(ctx, exec, "recipient", "rcpt:"+normalizeAddr(m.To.Address), l, now); err != nil {
			return err
		}
	}
	if l := q.lane.IPLimit; o.clientIP != "" && !l.off() {
		if err := q.bump(ctx, exec, "client IP", "ip:"+o.clientIP, l, now); err != nil {
			return err
		}
	}
	return nil
}

func (q *Queue) bump(ctx context.Context, exec DBTX, what, subject string, l Limit, now time.Time) error {
	sum := sha256.Sum256([]byte(subject))
	key := hex.EncodeToString(sum[:])
	per := l.Per.Milliseconds()
	nowMS := now.UnixMilli()
	window := nowMS / per * per

	upsert := `INSERT INTO ` + q.limits + ` (lkey, window_start, n) VALUES (?, ?, 1) ON DUPLICATE KEY UPDATE n = n + 1`
	if q.d.sqlite {
		upsert = `INSERT INTO ` + q.limits + ` (lkey, window_start, n) VALUES (?, ?, 1) ON CONFLICT (lkey, window_start) DO UPDATE SET n = n + 1`
	}
	if _, err := exec.ExecContext(ctx, q.d.lockBounded(upsert, q.lockWait), key, window); err != nil {
		if lerr := q.lockError(err); lerr != err {
			return lerr
		}
		return fmt.Errorf("queue: enqueue: counting the %s limit: %w", what, err)
	}
	cur, err := q.counter(ctx, exec, key, window)
	if err != nil {
		return err
	}
	prev, err := q.counter(ctx, exec, key, window-per)
	if err != nil {
		return err
	}
	overlap := 1 - float64(nowMS-window)/float64(per)
	if estimate := float64(prev)*overlap + float64(cur); estimate <= float64(l.N)+1e-9 {
		return nil
	}
	// The estimate can point past the window; by then the whole window of
	// mails counted here has slid by, so Per is always enough.
	retry := min(limitRetryAfter(prev, cur, l.N, nowMS, window, per), l.Per)
	return &RateLimitError{Limit: what, Max: l.N, Per: l.Per, RetryAfter: retry}
}

// counter reads one window's count; our own upsert is visible to us.
func (q *Queue) counter(ctx context.Context, exec DBTX, key string, window int64) (int, error) {
	var n int
	err := q.lockError(exec.QueryRowContext(ctx, q.d.lockBounded(`SELECT n FROM `+q.limits+` WHERE lkey = ? AND window_start = ?`, q.lockWait), key, window).Scan(&n))
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("queue: enqueue: reading a rate-limit counter: %w", err)
	}
	return n, nil
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

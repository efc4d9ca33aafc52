package queue

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// backoff yields waits from min doubling up to max.
type backoff struct {
	min, max time.Duration
	cur      time.Duration
}

func (b *backoff) next() time.Duration {
	b.cur = min(max(2*b.cur, b.min), b.max)
	return b.cur
}

func (b *backoff) reset() { b.cur = 0 }

// maxClaimBackoff caps the wait between failing claims.
const maxClaimBackoff = 30 * time.Second

// health tracks how long one kind of statement has been failing without a
// break.
type health struct {
	mu           sync.Mutex
	failingSince time.Time
	lastErr      error
}

func (h *health) ok() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failingSince, h.lastErr = time.Time{}, nil
}

func (h *health) failed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failingSince.IsZero() {
		h.failingSince = time.Now()
	}
	h.lastErr = err
}

// check returns an error once what (claims, writes) has been failing for
// limit.
func (h *health) check(what string, limit time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failingSince.IsZero() {
		return nil
	}
	if d := time.Since(h.failingSince); d >= limit {
		return fmt.Errorf("%s have failed for %v: %w", what, d.Round(time.Second), h.lastErr)
	}
	return nil
}

// fileCheck returns a function that fails once the SQLite file the queue
// opened has been deleted or replaced (a restore, a careless rm): a worker
// that went on would write to a file nobody reads and never see new mail.
// For MySQL the function always returns nil.
func (q *Queue) fileCheck() (func() error, error) {
	if q.file == "" {
		return func() error { return nil }, nil
	}
	return func() error {
		fi, err := os.Stat(q.file)
		switch {
		case err != nil:
			return fmt.Errorf("queue: the SQLite file %s is gone (%v); restart the worker on the current file", q.file, err)
		case !os.SameFile(q.fileInfo, fi):
			return fmt.Errorf("queue: the SQLite file %s was replaced since the worker opened it; restart the worker on the new file", q.file)
		}
		return nil
	}, nil
}

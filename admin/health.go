package admin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mailspool/mailspool/queue"
)

// HealthOptions configure a Health. Zero fields take the defaults shown.
type HealthOptions struct {
	// Stall is how long a worker's claim loop may go without a turn before
	// the process is unhealthy (default 5m). A turn waits for sends in
	// flight when two batches are out, so Stall must exceed the time a
	// batch of sends may take; the time a lane's breaker holds claiming
	// paused is added to it.
	Stall time.Duration
	// PingTimeout bounds the database ping of Check (default 3s).
	PingTimeout time.Duration
}

// Health answers whether a worker process is healthy: its database
// answers, and the claim loop of each of its lanes has turned within
// HealthOptions.Stall. It is fed by the Observer that Lane returns. It is
// safe for concurrent use.
type Health struct {
	db   *sql.DB
	opts HealthOptions

	mu    sync.Mutex
	lanes map[string]*loop
}

type loop struct {
	turned time.Time // last turn of the claim loop (or the lane's start)
	paused time.Time // the breaker holds claiming until then
	// operator: an operator paused the lane (mailspool pause), as of the
	// last turn; since and reason are the pause's.
	operator bool
	since    time.Time
	reason   string
}

// NewHealth returns a Health for workers on db. nil opts means defaults.
func NewHealth(db *sql.DB, opts *HealthOptions) *Health {
	var o HealthOptions
	if opts != nil {
		o = *opts
	}
	if o.Stall <= 0 {
		o.Stall = 5 * time.Minute
	}
	if o.PingTimeout <= 0 {
		o.PingTimeout = 3 * time.Second
	}
	return &Health{db: db, opts: o, lanes: map[string]*loop{}}
}

// Lane starts watching the claim loop of the named lane, counting from
// now, and returns the Observer to set in that lane worker's options.
func (h *Health) Lane(name string) *queue.Observer {
	h.mu.Lock()
	h.lanes[name] = &loop{turned: time.Now()}
	h.mu.Unlock()
	return &queue.Observer{
		ClaimFunc: func(e queue.ClaimEvent) {
			h.mu.Lock()
			defer h.mu.Unlock()
			if l := h.lanes[e.Lane]; l != nil {
				l.turned = time.Now()
			}
		},
		PauseFunc: func(e queue.PauseEvent) {
			h.mu.Lock()
			defer h.mu.Unlock()
			if l := h.lanes[e.Lane]; l != nil {
				l.operator, l.since, l.reason = e.Paused, e.Since, e.Reason
			}
		},
		BreakerFunc: func(e queue.BreakerEvent) {
			h.mu.Lock()
			defer h.mu.Unlock()
			if l := h.lanes[e.Lane]; l != nil {
				l.paused = time.Time{}
				if e.Open {
					l.paused = e.Until
				}
			}
		},
	}
}

// Loops returns an error naming every lane whose claim loop has not turned
// within Stall (plus any breaker pause), nil when all are turning.
func (h *Health) Loops() error {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	var stalled []string
	for name, l := range h.lanes {
		since := l.turned
		if l.paused.After(since) {
			since = l.paused
		}
		if idle := now.Sub(since); idle > h.opts.Stall {
			stalled = append(stalled, fmt.Sprintf("%s (no claim for %v)", name, idle.Round(time.Second)))
		}
	}
	if len(stalled) == 0 {
		return nil
	}
	slices.Sort(stalled)
	return errors.New("admin: claim loop stalled: " + strings.Join(stalled, ", "))
}

// Degraded names what works but not fully: each lane an operator paused,
// who paused it, since when and why. A paused lane is not a failure of the
// process (restarting it changes nothing), so Check passes.
func (h *Health) Degraded() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for name, l := range h.lanes {
		if !l.operator {
			continue
		}
		s := "lane " + name + " paused by operator"
		if !l.since.IsZero() {
			s += " since " + l.since.UTC().Format(time.RFC3339)
		}
		if l.reason != "" {
			s += ": " + l.reason
		}
		out = append(out, s+" (mailspool resume --lane "+name+")")
	}
	slices.Sort(out)
	return out
}

// Check returns nil when the database answers a ping within PingTimeout
// and every claim loop is turning (Loops), else an error saying which is
// wrong.
func (h *Health) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, h.opts.PingTimeout)
	defer cancel()
	var errs []error
	if err := h.db.PingContext(ctx); err != nil {
		errs = append(errs, fmt.Errorf("admin: database does not answer: %w", err))
	}
	if err := h.Loops(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

package queue

import (
	"fmt"
	"time"
)

// Bounds of a lane's and a worker's settings, in one place: Lane.Validate
// and WorkerOptions.Validate (and so config.Load) refuse a value outside
// them. A duration is bounded by what the code does with it, not only by
// what time.Duration holds: the worker adds, doubles and sums them
// (ClaimInterval is 2 × (SendTimeout + 2 s) or FailAfter, plus the poll
// interval and a back-off; a shutdown waits ShutdownTimeout after the
// sends were stopped), and every sum must still fit.
const (
	MaxConcurrency     = 1000                // sends in flight per worker
	MaxSendTimeout     = time.Hour           // one Send
	MaxLeaseMargin     = 24 * time.Hour      // a lease's margin over its sends
	MaxPollInterval    = time.Hour           // idle polling
	MaxRescueInterval  = time.Hour           // the rescuer's period
	MaxShutdownTimeout = 24 * time.Hour      // sends in flight after SIGTERM
	MaxFailAfter       = 30 * 24 * time.Hour // the database failing before Run gives up
	MaxCleanupInterval = 30 * 24 * time.Hour // cleanup's period
	MaxRetention       = 100 * 365 * day     // keep_sent, keep_failed
	MaxRetryWait       = 365 * day           // one step of a retry schedule, a breaker pause
	MaxLimitWindow     = 365 * day           // a rate limit's Per
	MaxLockTimeout     = time.Hour           // an enqueue's lock wait (MySQL)
	day                = 24 * time.Hour
)

// durationBound is one duration setting and its bound.
type durationBound struct {
	name string
	v    time.Duration
	max  time.Duration
}

// checkDurations refuses a negative duration or one above its bound.
func checkDurations(what string, ds ...durationBound) error {
	for _, d := range ds {
		switch {
		case d.v < 0:
			return fmt.Errorf("queue: %s %s %v is negative", what, d.name, d.v)
		case d.v > d.max:
			return fmt.Errorf("queue: %s %s %v is over its bound of %v", what, d.name, d.v, d.max)
		}
	}
	return nil
}

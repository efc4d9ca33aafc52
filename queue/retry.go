package queue

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// RetryPolicy says when a failed mail is tried again. Zero fields take the
// defaults shown.
type RetryPolicy struct {
	// MaxAttempts is the number of delivery attempts before a mail that
	// keeps failing temporarily is failed (default 5). An enqueue option can
	// lower it per mail (1 = a single attempt).
	MaxAttempts int
	// Schedule is the wait after the 1st, 2nd, ... temporary failure; the
	// last entry repeats (default 2m, 10m, 30m, 2h).
	Schedule []time.Duration
	// ConnectionSchedule is the wait after a connection failure, indexed by
	// how many connection failures the lane has seen in a row; the last
	// entry repeats (default 5m, 15m, 30m, 1h, 2h). A connection failure
	// does not use up an attempt.
	ConnectionSchedule []time.Duration
	// Jitter adds a random 0..Jitter fraction of the wait (default 0.2), so
	// mails that failed together do not retry together. Set a negative
	// value for none.
	Jitter float64
	// BreakerThreshold is the number of lane-level failures in a row (a
	// Connection failure not about one recipient) after which a worker
	// stops claiming from the lane (default 5).
	BreakerThreshold int
	// BreakerPause is the first pause once the breaker opens (default 30s);
	// each further failed probe doubles it, up to BreakerMaxPause (default
	// 10m).
	BreakerPause    time.Duration
	BreakerMaxPause time.Duration
}

// DefaultRetryPolicy is the policy a zero RetryPolicy stands for.
var DefaultRetryPolicy = RetryPolicy{
	MaxAttempts:        5,
	Schedule:           []time.Duration{2 * time.Minute, 10 * time.Minute, 30 * time.Minute, 2 * time.Hour},
	ConnectionSchedule: []time.Duration{5 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour},
	Jitter:             0.2,
	BreakerThreshold:   5,
	BreakerPause:       30 * time.Second,
	BreakerMaxPause:    10 * time.Minute,
}

func (p RetryPolicy) withDefaults() (RetryPolicy, error) {
	d := DefaultRetryPolicy
	if p.MaxAttempts == 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.Schedule == nil {
		p.Schedule = d.Schedule
	}
	if p.ConnectionSchedule == nil {
		p.ConnectionSchedule = d.ConnectionSchedule
	}
	if p.Jitter == 0 {
		p.Jitter = d.Jitter
	}
	if p.Jitter < 0 {
		p.Jitter = 0
	}
	if p.BreakerThreshold == 0 {
		p.BreakerThreshold = d.BreakerThreshold
	}
	if p.BreakerPause == 0 {
		p.BreakerPause = d.BreakerPause
	}
	if p.BreakerMaxPause == 0 {
		p.BreakerMaxPause = d.BreakerMaxPause
	}
	switch {
	case p.MaxAttempts < 1 || p.MaxAttempts > 1000:
		return p, fmt.Errorf("retry: max attempts %d out of range 1..1000", p.MaxAttempts)
	case len(p.Schedule) == 0 || len(p.ConnectionSchedule) == 0:
		return p, errors.New("retry: empty schedule")
	case !(p.Jitter <= 1): // NaN compares false with everything
		return p, fmt.Errorf("retry: jitter %v over 1", p.Jitter)
	case p.BreakerThreshold < 1:
		return p, fmt.Errorf("retry: breaker threshold %d below 1", p.BreakerThreshold)
	case p.BreakerPause < 0 || p.BreakerMaxPause < p.BreakerPause:
		return p, fmt.Errorf("retry: breaker pause %v / max %v out of order", p.BreakerPause, p.BreakerMaxPause)
	case p.BreakerMaxPause > MaxRetryWait:
		return p, fmt.Errorf("retry: breaker max pause %v over its bound of %v", p.BreakerMaxPause, MaxRetryWait)
	}
	for _, s := range [][]time.Duration{p.Schedule, p.ConnectionSchedule} {
		for _, w := range s {
			if w <= 0 {
				return p, fmt.Errorf("retry: schedule entry %v is not positive", w)
			}
			if w > MaxRetryWait {
				return p, fmt.Errorf("retry: schedule entry %v is over its bound of %v", w, MaxRetryWait)
			}
		}
	}
	return p, nil
}

// scheduleAt returns schedule[i], the last entry for i past the end.
func scheduleAt(schedule []time.Duration, i int) time.Duration {
	if i < 0 {
		i = 0
	}
	if i >= len(schedule) {
		i = len(schedule) - 1
	}
	return schedule[i]
}

// withJitter adds a uniform random 0..jitter fraction of d.
func withJitter(d time.Duration, jitter float64) time.Duration {
	if jitter <= 0 {
		return d
	}
	return d + time.Duration(rand.Float64()*jitter*float64(d))
}

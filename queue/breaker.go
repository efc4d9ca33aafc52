package queue

import (
	"sync"
	"time"

	"github.com/mailspool/mailspool/transport"
)

// breaker pauses a worker's claiming after BreakerThreshold lane-level
// failures in a row, so that a provider outage costs a few probes instead
// of every queued mail's attempts. Once the pause is over the worker sends
// a single mail as a probe; a lane-level failure re-opens the breaker for
// twice as long (up to BreakerMaxPause), any other outcome closes it.
type breaker struct {
	policy RetryPolicy

	mu     sync.Mutex
	streak int       // lane-level failures in a row
	until  time.Time // paused until then
	pause  time.Duration
	probe  bool // the pause is over: claim one mail to probe
}

// laneFailure reports whether a send's error (of kind, its KindOf) is a
// lane-level failure, the only kind that feeds the breaker: a Connection
// failure of lane scope (no reply at all, TLS, DNS, authentication). A
// reply about one recipient, one message or our sender is an answer from
// a working provider, whatever kind it was given.
func laneFailure(kind transport.Kind, err error) bool {
	return kind == transport.Connection && transport.ScopeOf(err) == transport.ScopeLane
}

// record notes one outcome, lane-level failure or not (see laneFailure),
// and returns the streak of lane-level failures, this one included (0 for
// any other outcome), and whether this outcome closed an open breaker (the
// provider is back).
func (b *breaker) record(failed bool, now time.Time) (streak int, recovered bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !failed {
		recovered = b.pause > 0
		b.streak, b.pause, b.probe = 0, 0, false
		return 0, recovered
	}
	b.streak++
	if b.streak >= b.policy.BreakerThreshold && !now.Before(b.until) {
		switch {
		case b.pause == 0:
			b.pause = b.policy.BreakerPause
		default:
			b.pause = min(2*b.pause, b.policy.BreakerMaxPause)
		}
		b.until = now.Add(b.pause)
		b.probe = true
	}
	return b.streak, false
}

// state reports how long claiming is still paused (0 when not) and how
// many rows the next claim may take out of batch.
func (b *breaker) state(now time.Time, batch int) (time.Duration, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if wait := b.until.Sub(now); wait > 0 {
		return wait, 0
	}
	if b.probe {
		return 0, 1
	}
	return 0, batch
}

// open reports whether the breaker is open at now: sends not yet started
// should be given back instead of tried.
func (b *breaker) open(now time.Time) (bool, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return now.Before(b.until), b.until
}

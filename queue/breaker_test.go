package queue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestBreakerPauseDoublesUpToItsMaximum: each failed probe doubles the
// pause up to BreakerMaxPause and no further, so a lane whose provider was
// down for hours probes again within the maximum once it is back; a
// success closes the breaker and the next outage starts from BreakerPause.
func TestBreakerPauseDoublesUpToItsMaximum(t *testing.T) {
	b := breaker{policy: RetryPolicy{BreakerThreshold: 2, BreakerPause: 30 * time.Second, BreakerMaxPause: 5 * time.Minute}}
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	b.record(true, now)
	pause, limit := b.state(now, 10)
	assert.Zero(t, pause, "one failure is below the threshold")
	assert.Equal(t, 10, limit)

	b.record(true, now)
	var pauses []time.Duration
	for range 8 {
		pause, limit := b.state(now, 10)
		assert.Zero(t, limit)
		pauses = append(pauses, pause)
		now = now.Add(pause)
		_, limit = b.state(now, 10)
		assert.Equal(t, 1, limit, "after the pause, one probe")
		b.record(true, now) // the probe fails
	}
	assert.Equal(t, []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute,
		5 * time.Minute, 5 * time.Minute, 5 * time.Minute, 5 * time.Minute}, pauses)

	now = now.Add(5 * time.Minute)
	_, recovered := b.record(false, now)
	assert.True(t, recovered, "the probe succeeded")
	_, limit = b.state(now, 10)
	assert.Equal(t, 10, limit, "closed")
	b.record(true, now)
	b.record(true, now)
	pause, _ = b.state(now, 10)
	assert.Equal(t, 30*time.Second, pause, "the next outage starts from the first pause")
}

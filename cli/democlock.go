package cli

import (
	"sync"
	"time"
)

// scaledClock is a queue.Clock that runs Speed times faster than the system clock
// from the moment it is made: with Speed 600, a 2-minute retry delay passes
// in 200 ms. It shows the demo's retries in seconds.
type scaledClock struct {
	speed float64
	start time.Time
	mu    sync.Mutex
}

// newScaledClock returns a clock that starts at the current time and runs
// speed times faster (speed >= 1).
func newScaledClock(speed float64) *scaledClock {
	if speed < 1 {
		speed = 1
	}
	return &scaledClock{speed: speed, start: time.Now()}
}

// Now returns start + speed × (real time elapsed).
func (c *scaledClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start.Add(time.Duration(float64(time.Since(c.start)) * c.speed))
}

// After waits d/speed of real time.
func (c *scaledClock) After(d time.Duration) <-chan time.Time {
	return time.After(time.Duration(float64(d) / c.speed))
}

package queue

import (
	"sync"
	"time"
)

// Clock tells the queue what time it is and waits on its behalf. Tests and
// the demo inject one; the zero Queue and Worker use the system clock.
type Clock interface {
	Now() time.Time
	// After waits for d of this clock's time, like time.After.
	After(d time.Duration) <-chan time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// ScaledClock is a Clock that runs Speed times faster than the system clock
// from the moment it is made: with Speed 600, a 2-minute retry delay passes
// in 200 ms. The demo uses it to show retries in seconds.
type ScaledClock struct {
	speed float64
	start time.Time
	mu    sync.Mutex
}

// NewScaledClock returns a clock that starts at the current time and runs
// speed times faster (speed >= 1).
func NewScaledClock(speed float64) *ScaledClock {
	if speed < 1 {
		speed = 1
	}
	return &ScaledClock{speed: speed, start: time.Now()}
}

// Now returns start + speed × (real time elapsed).
func (c *ScaledClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start.Add(time.Duration(float64(time.Since(c.start)) * c.speed))
}

// After waits d/speed of real time.
func (c *ScaledClock) After(d time.Duration) <-chan time.Time {
	return time.After(time.Duration(float64(d) / c.speed))
}

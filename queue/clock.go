package queue

import "time"

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

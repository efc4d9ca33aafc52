package statuspage

import (
	"context"
	"sync"
	"time"
)

// cache keeps each figure for ttl; concurrent requests for a stale figure
// wait for one read of it instead of each reading it.
type cache struct {
	ttl     time.Duration
	mu      sync.Mutex
	entries map[string]*entry
}

type entry struct {
	mu  sync.Mutex // held while the figure is read
	at  time.Time
	val any
	err error
}

func newCache(ttl time.Duration) *cache {
	return &cache{ttl: ttl, entries: map[string]*entry{}}
}

// get returns the figure under key, read by load when it is older than
// ttl, and when it was read. A failed read is kept for ttl too, so a
// database in trouble is not asked again by every request; one cut short
// by the request's own end is not kept.
func (c *cache) get(ctx context.Context, key string, load func(context.Context) (any, error)) (any, time.Time, error) {
	c.mu.Lock()
	e := c.entries[key]
	if e == nil {
		e = &entry{}
		c.entries[key] = e
	}
	c.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.at.IsZero() && time.Since(e.at) < c.ttl {
		return e.val, e.at, e.err
	}
	val, err := load(ctx)
	if err != nil && ctx.Err() != nil {
		return nil, time.Time{}, err
	}
	e.val, e.err, e.at = val, err, time.Now()
	return val, e.at, err
}

// forget drops the figure under key, so that the next request reads it.
func (c *cache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, key)
}

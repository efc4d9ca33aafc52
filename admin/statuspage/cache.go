package statuspage

import (
	"context"
	"sync"
	"time"
)

// staleFor is how many CacheFor a figure may be shown while a fresh one is
// read in the background: a browser on the overview (which reloads every
// 15 s) never waits for the database, and a page nobody looked at for
// longer waits for fresh figures.
const staleFor = 4

// refreshTimeout bounds a read in the background.
const refreshTimeout = 30 * time.Second

// cache keeps each figure for ttl. A figure older than ttl but younger than
// staleFor × ttl is returned as it is while one read of it runs in the
// background; an older one is read while the request waits, and
// concurrent requests for it wait for that one read.
type cache struct {
	ttl     time.Duration
	now     func() time.Time
	mu      sync.Mutex
	entries map[string]*entry
}

type entry struct {
	mu         sync.Mutex // held while the figure is read for a waiting request
	at         time.Time
	val        any
	err        error
	refreshing bool // a read runs in the background
}

func newCache(ttl time.Duration) *cache {
	return &cache{ttl: ttl, now: time.Now, entries: map[string]*entry{}}
}

// get returns the figure under key, read by load as described on cache,
// and when it was read. A failed read is kept for ttl too, so that a
// database in trouble is not asked again by every request, but never
// shown stale; one cut short by the request's own end is not kept.
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
	age := c.now().Sub(e.at)
	switch {
	case !e.at.IsZero() && age < c.ttl:
		return e.val, e.at, e.err
	case !e.at.IsZero() && e.err == nil && age < staleFor*c.ttl:
		if !e.refreshing {
			e.refreshing = true
			go c.refresh(context.WithoutCancel(ctx), e, load)
		}
		return e.val, e.at, nil
	}
	val, err := load(ctx)
	if err != nil && ctx.Err() != nil {
		return nil, time.Time{}, err
	}
	e.val, e.err, e.at = val, err, c.now()
	return val, e.at, err
}

// refresh reads e in the background.
func (c *cache) refresh(ctx context.Context, e *entry, load func(context.Context) (any, error)) {
	ctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	val, err := load(ctx)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.refreshing = false
	e.val, e.err, e.at = val, err, c.now()
}

// forget drops the figure under key, so that the next request reads it.
func (c *cache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, key)
}

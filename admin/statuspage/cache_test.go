package statuspage

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeNow is a clock that moves only when told to.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeNow) now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeNow) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(d)
}

func TestCache(t *testing.T) {
	ctx := context.Background()
	clock := &fakeNow{t: time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)}
	c := newCache(5 * time.Second)
	c.now = clock.now
	reads := 0
	value := func(v int) func(context.Context) (any, error) {
		return func(context.Context) (any, error) { reads++; return v, nil }
	}
	get := func(load func(context.Context) (any, error)) any {
		t.Helper()
		v, _, err := c.get(ctx, "k", load)
		require.NoError(t, err)
		return v
	}

	assert.Equal(t, 1, get(value(1)), "the first request reads")
	clock.advance(4 * time.Second)
	assert.Equal(t, 1, get(value(2)), "within ttl: kept")
	assert.Equal(t, 1, reads)

	// Past ttl, within staleFor × ttl: the old figure at once, one read in
	// the background, which the request does not wait for.
	clock.advance(2 * time.Second)
	release, done := make(chan struct{}), make(chan struct{})
	slow := func(context.Context) (any, error) {
		defer close(done)
		<-release
		return 3, nil
	}
	assert.Equal(t, 1, get(slow), "the stale figure, without waiting for the read")
	assert.Equal(t, 1, get(value(4)), "a second request neither waits nor starts another read")
	close(release)
	<-done
	require.Eventually(t, func() bool { return get(value(5)) == 3 }, 10*time.Second, time.Millisecond, "the background read's figure")
	assert.Equal(t, 1, reads, "value(4) and value(5) never ran")

	// Long unread: the request waits for a fresh figure.
	clock.advance(staleFor * 5 * time.Second)
	assert.Equal(t, 6, get(value(6)))

	// A failure is kept for ttl, and never shown stale.
	clock.advance(6 * time.Second)
	fail := func(context.Context) (any, error) { reads++; return nil, errors.New("db down") }
	_, _, err := c.get(ctx, "k", fail) // stale: the old figure, the failing read in the background
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		c.mu.Lock()
		e := c.entries["k"]
		c.mu.Unlock()
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.err != nil
	}, 10*time.Second, time.Millisecond)
	_, _, err = c.get(ctx, "k", value(7))
	assert.ErrorContains(t, err, "db down", "kept for ttl")
	clock.advance(6 * time.Second)
	assert.Equal(t, 7, get(value(7)), "after ttl a failure is read again at once, not shown stale")

	c.forget("k")
	assert.Equal(t, 8, get(value(8)), "forgotten: read again")
}

package smtp

import (
	"context"
	"sync"
	"time"

	"github.com/mailspool/mailspool/transport"
)

// pool holds the sessions of a Transport: at most size open at once (busy
// or idle), idle ones reused most recent first and closed after
// idleTimeout.
type pool struct {
	slots       chan struct{} // one token per open or opening session
	idleTimeout time.Duration

	mu     sync.Mutex
	idle   []*session
	closed bool
	done   chan struct{} // closed by close
}

func newPool(size int, idleTimeout time.Duration) *pool {
	return &pool{slots: make(chan struct{}, size), idleTimeout: idleTimeout, done: make(chan struct{})}
}

// acquire waits for a free slot. It fails when ctx ends or the pool is
// closed first.
func (p *pool) acquire(ctx context.Context) error {
	select {
	case <-p.done:
		return transport.ErrClosed
	default:
	}
	select {
	case p.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-p.done:
		return transport.ErrClosed
	}
}

// release frees a slot taken by acquire.
func (p *pool) release() { <-p.slots }

// take removes and returns the most recently used idle session, or nil.
func (p *pool) take() *session {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.idle)
	if n == 0 {
		return nil
	}
	s := p.idle[n-1]
	p.idle = p.idle[:n-1]
	s.idle.Stop() // if it already fired, expire finds s gone and does nothing
	return s
}

// put makes s idle and frees its slot; after close it quits s instead.
func (p *pool) put(s *session) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		s.quit()
		p.release()
		return
	}
	s.idle = time.AfterFunc(p.idleTimeout, func() { p.expire(s) })
	p.idle = append(p.idle, s)
	p.mu.Unlock()
	p.release()
}

// discard closes s, which is broken or in an unknown state, and frees its
// slot.
func (p *pool) discard(s *session) {
	s.close()
	p.release()
}

// expire quits s if it is still idle.
func (p *pool) expire(s *session) {
	p.mu.Lock()
	for i, x := range p.idle {
		if x == s {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			p.mu.Unlock()
			s.quit()
			return
		}
	}
	p.mu.Unlock()
}

// close quits the idle sessions and makes later acquires fail; busy
// sessions are quit when they are put back. Closing again does nothing.
func (p *pool) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.done)
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range idle {
		s.idle.Stop()
		wg.Go(s.quit)
	}
	wg.Wait()
}

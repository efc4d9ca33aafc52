package smtp

import (
	"context"
	"net"
	"sync"
	"time"
)

// conn is the TCP connection under any TLS layer. It owns the deadlines:
// every Read and Write first moves the deadline to now + timeout (a
// per-command I/O timeout that a long DATA transfer keeps refreshing), but
// never past limit. Deadlines set from above (go-mail sets one absolute
// deadline per send) are ignored.
type conn struct {
	net.Conn
	timeout time.Duration

	mu    sync.Mutex
	limit time.Time // zero: no limit
}

// aborted is a limit in the past: every pending and later I/O fails at once.
var aborted = time.Unix(1, 0)

func (c *conn) Read(p []byte) (int, error) {
	if err := c.refresh(); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *conn) Write(p []byte) (int, error) {
	if err := c.refresh(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

func (c *conn) refresh() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := time.Now().Add(c.timeout)
	if !c.limit.IsZero() && c.limit.Before(d) {
		d = c.limit
	}
	return c.Conn.SetDeadline(d)
}

// look tells, without a round trip and without taking anything from the
// socket, whether the connection is still open and quiet (see peek). It
// moves the deadline on first: the one the last reply set may have passed
// while the connection waited in the pool, and a look past it fails.
func (c *conn) look() idleState {
	if err := c.refresh(); err != nil {
		return gone
	}
	return peek(c.Conn)
}

// setLimit sets the time after which all I/O fails and applies it to I/O in
// progress.
func (c *conn) setLimit(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.limit = t
	_ = c.Conn.SetDeadline(t) // only fails on a closed connection
}

// bind makes ctx's end abort all I/O on c. stop reports whether it was
// unbound before ctx ended; if not, c is unusable.
func (c *conn) bind(ctx context.Context) (stop func() bool) {
	return context.AfterFunc(ctx, func() { c.setLimit(aborted) })
}

// SetDeadline ignores t: c manages its own deadlines.
func (c *conn) SetDeadline(time.Time) error { return nil }

// SetReadDeadline ignores t: c manages its own deadlines.
func (c *conn) SetReadDeadline(time.Time) error { return nil }

// SetWriteDeadline ignores t: c manages its own deadlines.
func (c *conn) SetWriteDeadline(time.Time) error { return nil }

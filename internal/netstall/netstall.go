// Package netstall is a loopback TCP proxy for tests that cuts the path
// to a database server in the middle of a statement: after a given number
// of bytes, or at the first occurrence of a given string, from a client,
// it stops forwarding on every connection it holds, in both directions,
// without closing any (no RST, no FIN: a network path that drops
// everything), and connections made during the stall are accepted and
// never answered. After Heal, new connections are forwarded again; the
// stalled ones stay dead until the test ends.
package netstall

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// Proxy is a stalling proxy to one server.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	conns   []*conn
	budget  int64  // bytes from clients still forwarded before the stall; -1: none armed
	pattern []byte // stall at its first occurrence from a client
	stalled bool
	done    chan struct{}
}

type conn struct {
	client, server net.Conn
	dead           bool // under Proxy.mu
}

// New starts a proxy to target (host:port), closed when t ends.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, budget: -1, done: make(chan struct{})}
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		close(p.done)
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.client.Close()
			if c.server != nil {
				c.server.Close()
			}
		}
	})
	return p
}

// Addr is the address clients connect to instead of the server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		c := &conn{client: client}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		c.dead = p.stalled
		p.mu.Unlock()
		if c.dead {
			continue // accepted, never answered
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		c.server = server
		p.mu.Unlock()
		go p.pump(c, server, client, true)
		go p.pump(c, client, server, false)
	}
}

// pump copies src to dst until the stall, then holds until the test ends.
func (p *Proxy) pump(c *conn, dst, src net.Conn, fromClient bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			b := buf[:n]
			p.mu.Lock()
			forward := b
			switch {
			case c.dead:
				forward = nil
			case fromClient && !p.stalled && p.budget >= 0:
				if int64(len(b)) >= p.budget {
					forward = b[:p.budget]
					p.stallLocked()
				} else {
					p.budget -= int64(len(b))
				}
			case fromClient && !p.stalled && p.pattern != nil:
				// A pattern split across two reads is not seen; the
				// statements tests look for arrive in one.
				if i := bytes.Index(b, p.pattern); i >= 0 {
					forward = b[:i+len(p.pattern)/2]
					p.stallLocked()
				}
			}
			dead := c.dead
			p.mu.Unlock()
			if len(forward) > 0 {
				if _, werr := dst.Write(forward); werr != nil {
					return
				}
			}
			if dead {
				<-p.done
				return
			}
		}
		if err != nil {
			p.mu.Lock()
			dead := c.dead
			p.mu.Unlock()
			if !dead {
				dst.Close()
			}
			return
		}
	}
}

func (p *Proxy) stallLocked() {
	p.stalled = true
	for _, o := range p.conns {
		o.dead = true
	}
}

// StallAfter arms the stall: n more bytes from clients go through.
func (p *Proxy) StallAfter(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.budget = n
}

// StallOn arms the stall at the first occurrence of s in what a client
// sends: the first half of s goes through, then nothing.
func (p *Proxy) StallOn(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pattern = []byte(s)
}

// Stalled reports whether the stall has happened (and not been healed).
func (p *Proxy) Stalled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stalled
}

// Heal lets new connections through again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalled, p.budget, p.pattern = false, -1, nil
}

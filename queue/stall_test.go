package queue

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/transport"
)

// stallProxy forwards loopback TCP connections to a database server until
// told to stall: then, after a given number of further bytes from the
// client (so that a statement is cut in the middle), it stops forwarding
// on every connection it holds, in both directions, without closing any,
// and connections made during the stall are accepted and never forwarded:
// a network path that drops everything. After heal, new connections
// forward again; the stalled ones stay dead until the test ends.
type stallProxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	conns   []*proxyConn
	budget  int64 // bytes from clients still forwarded before the stall; -1: no stall armed
	stalled bool
	done    chan struct{}
}

type proxyConn struct {
	client, server net.Conn
	dead           bool // under p.mu
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &stallProxy{ln: ln, target: target, budget: -1, done: make(chan struct{})}
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

func (p *stallProxy) addr() string { return p.ln.Addr().String() }

func (p *stallProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		c := &proxyConn{client: client}
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
func (p *stallProxy) pump(c *proxyConn, dst, src net.Conn, fromClient bool) {
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
			case fromClient && p.budget >= 0 && !p.stalled:
				if int64(len(b)) >= p.budget {
					forward = b[:p.budget]
					p.stalled = true
					for _, o := range p.conns {
						o.dead = true
					}
				} else {
					p.budget -= int64(len(b))
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
			if err != io.EOF {
				return
			}
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

// stallAfter arms the stall: n more bytes from clients go through.
func (p *stallProxy) stallAfter(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.budget = n
}

func (p *stallProxy) isStalled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stalled
}

// heal lets new connections through again.
func (p *stallProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalled, p.budget = false, -1
}

// TestDatabaseStallMidStatement puts a proxy between a worker and its
// MariaDB or PostgreSQL server, and in the middle of a drain cuts the path
// a few bytes into the next statement: every connection the worker holds
// stops answering without being closed (no RST, no FIN), and new ones are
// accepted and never answered, for longer than the worker's statement
// bounds and its leases. Then new connections work again. The worker must
// not hang on a dead connection: it drains the rest on new ones (the wait
// is for progress; a worker blocked forever makes none), and every mail is
// sent exactly once and recorded sent, none left sending. SQLite has no
// network path to stall.
func TestDatabaseStallMidStatement(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"mariadb", "postgres"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var s store
			if name == "mariadb" {
				s = newMariaDBStore(t)
			} else {
				s = newPostgresStore(t)
			}
			u, err := url.Parse(s.url)
			require.NoError(t, err)
			p := newStallProxy(t, u.Host)
			u.Host = p.addr()
			db, err := dburl.Open(u.String())
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })

			const n = 300
			lane := Lane{RecipientLimit: NoLimit}
			q := newQueue(t, s.db, lane, nil)
			enqueueN(t, q, n)
			tr := newFuncTransport(func(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
				time.Sleep(20 * time.Millisecond)
				return transport.Receipt{MessageID: "<" + m.MessageID + ">"}, nil
			})
			var problems problemLog
			w, err := NewWorker(newQueue(t, db, lane, nil), tr, &WorkerOptions{
				ID: "stalled", Batch: 20, Concurrency: 4, PollInterval: 50 * time.Millisecond,
				LeaseMargin: 5 * time.Second, Logger: problems.logger(),
			})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ran := make(chan error, 1)
			go func() { ran <- w.Run(ctx) }()
			defer func() {
				if t.Failed() {
					for _, l := range problems.Lines() {
						t.Log(l)
					}
				}
			}()

			sent := func() int { return countRows(t, s.db, q.table, "status = 2") }
			waitProgress(t, "before the stall", 60*time.Second, n/4, sent)
			p.stallAfter(10)
			for !p.isStalled() {
				time.Sleep(5 * time.Millisecond)
			}
			atStall := tr.total.Load()
			// Longer than a statement's bound (statementTimeout + 5 s) and
			// than the lease margin.
			time.Sleep(20 * time.Second)
			p.heal()
			t.Logf("sends at the stall %d, after it %d", atStall, tr.total.Load())

			waitProgress(t, "after the stall", 60*time.Second, n, sent)
			cancel()
			require.NoError(t, <-ran)

			assert.Len(t, tr.sends, n)
			for id, c := range tr.sends {
				if c != 1 {
					t.Errorf("message %s sent %d times", id, c)
				}
			}
			assert.Equal(t, 0, countRows(t, s.db, q.table, "status <> 2 OR locked_by <> ''"), "rows not sent, or still leased")
			st := w.Stats()
			t.Logf("worker: %+v", st)
			assert.NotZero(t, st.DBErrors, "the worker saw no database error: the stall was not met")
		})
	}
}

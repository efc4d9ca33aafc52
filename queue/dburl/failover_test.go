package dburl_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/queue/dburl/dburltest"
)

// forwarder is a TCP relay on loopback to the test's MariaDB: a server
// that can be taken down (listener and connections) while the real one
// goes on.
type forwarder struct {
	ln       net.Listener
	accepted atomic.Int32
	mu       sync.Mutex
	conns    []net.Conn
	down     bool
}

func forward(t *testing.T, addr, target string) *forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	f := &forwarder{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.accepted.Add(1)
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			if f.down {
				c.Close()
				s.Close()
			}
			f.conns = append(f.conns, c, s)
			f.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go func() { _, _ = io.Copy(c, s); c.Close() }()
		}
	}()
	t.Cleanup(f.kill)
	return f
}

// kill takes the server down as a crash does: the port refuses, and the
// connections it had are cut.
func (f *forwarder) kill() {
	f.ln.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = true
	for _, c := range f.conns {
		c.Close()
	}
}

func (f *forwarder) addr() string { return f.ln.Addr().String() }

// deadPort is a loopback address nothing listens on.
func deadPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// withHosts is the mysql:// URL u with its host replaced by a list.
func withHosts(t *testing.T, u string, hosts ...string) string {
	t.Helper()
	p, err := url.Parse(u)
	require.NoError(t, err)
	p.Host = "HOSTS"
	return strings.Replace(p.String(), "HOSTS", strings.Join(hosts, ","), 1)
}

// TestMySQLFailover: a URL listing a dead host and then the live server
// connects to the live one; a pool whose server dies reconnects to the
// next host that answers, and stays there when the first comes back.
func TestMySQLFailover(t *testing.T) {
	live := dburltest.MariaDB.Fresh(t)
	u, err := url.Parse(live)
	require.NoError(t, err)
	target := u.Host
	ctx := context.Background()

	db, err := dburl.Open(withHosts(t, live, deadPort(t), target))
	require.NoError(t, err)
	defer db.Close()
	var one int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT 1").Scan(&one), "the dead first host is passed over")

	first := forward(t, "127.0.0.1:0", target)
	second := forward(t, "127.0.0.1:0", target)
	firstAddr := first.addr()
	db2, err := dburl.Open(withHosts(t, live, firstAddr, second.addr()))
	require.NoError(t, err)
	defer db2.Close()
	db2.SetMaxIdleConns(1)
	_, err = db2.ExecContext(ctx, "CREATE TABLE t (id INT PRIMARY KEY)")
	require.NoError(t, err)
	assert.Equal(t, int32(1), first.accepted.Load(), "the first host is tried first")
	assert.Equal(t, int32(0), second.accepted.Load())

	first.kill()
	// The pooled connection is cut: the driver reports it bad, and the
	// pool connects again, to the second host. database/sql retries a
	// statement on a connection found bad before it was sent; one cut in
	// the middle may fail once, as with any server crash.
	var n int
	for attempt := 0; ; attempt++ {
		_, err = db2.ExecContext(ctx, "INSERT INTO t VALUES (?)", attempt)
		if err == nil {
			break
		}
		require.Less(t, attempt, 2, "no reconnection to the second host: %v", err)
	}
	require.NoError(t, db2.QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n))
	assert.Equal(t, 1, n)
	assert.GreaterOrEqual(t, second.accepted.Load(), int32(1), "the pool moved to the second host")

	// The first host answers again: new connections stay on the second,
	// so a pool never writes through two nodes of a cluster at once.
	back := forward(t, firstAddr, target)
	db2.SetMaxIdleConns(0) // every statement on a new connection
	for range 3 {
		require.NoError(t, db2.QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n))
	}
	assert.Equal(t, int32(0), back.accepted.Load(), "new connections went back to the first host")

	// All hosts down: one error naming each.
	second.kill()
	back.kill()
	err = db2.PingContext(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "none of the 2 database hosts answered")
	assert.Contains(t, err.Error(), firstAddr)
	assert.Contains(t, err.Error(), second.addr())
}

package smtp_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/transport"
)

// eventually polls cond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, 10*time.Millisecond, "after 5s: %s", what)
}

func TestConsecutiveSendsReuseOneConnection(t *testing.T) {
	t.Parallel()
	s := startServer(t, script{auth: []string{"PLAIN"}})
	tr := open(t, s.url(""))
	for i := range 5 {
		_, err := send(t, tr, message())
		require.NoError(t, err, "send %d", i)
	}
	conns, _, _ := s.connStats()
	_, auths, mails, rcpts, _ := s.counts()
	assert.Equal(t, 1, conns, "connections")
	assert.Equal(t, 1, auths, "AUTH")
	assert.Equal(t, 5, mails, "MAIL FROM")
	assert.Equal(t, 5, rcpts, "RCPT TO")
	assert.Len(t, s.mail(), 5, "mails accepted")
	oneRecipientEach(t, s)
}

// TestErrorDiscardsTheSession: after a failure that leaves the session in
// a state no one can tell (a 421, a dropped connection, a reply that does
// not fit the protocol) the connection is closed and the next message goes
// out on a fresh one.
func TestErrorDiscardsTheSession(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		at   stage
		a    action
	}{
		{"421 at mail", atMail, action{reply: "421 4.7.0 Closing"}},
		{"421 at rcpt", atRcpt, action{reply: "421 4.3.2 Shutting down"}},
		{"421 after data", afterData, action{reply: "421 4.3.2 Shutting down"}},
		{"drop at rcpt", atRcpt, action{drop: true}},
		{"354 at mail", atMail, action{reply: "354 Start mail input"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, script{})
			tr := open(t, s.url(""))
			s.set(tc.at, tc.a)
			_, err := send(t, tr, message())
			require.Error(t, err, "first send succeeded, want the scripted failure")
			s.set(tc.at, action{})
			_, err = send(t, tr, message())
			require.NoError(t, err, "send after a failure")
			conns, _, _ := s.connStats()
			assert.Equal(t, 2, conns, "connections")
			eventually(t, "the first connection is still open", func() bool {
				_, closed, _ := s.connStats()
				return closed >= 1
			})
		})
	}
}

// TestDeadPooledConnectionIsReplaced: a server that closed an idle
// connection costs a redial, not a failed message, and not a second
// transaction.
func TestDeadPooledConnectionIsReplaced(t *testing.T) {
	t.Parallel()
	s := startServer(t, script{auth: []string{"PLAIN"}})
	tr := open(t, s.url(""))
	_, err := send(t, tr, message())
	require.NoError(t, err)
	s.dropAll()
	_, err = send(t, tr, message())
	require.NoError(t, err, "send after the server dropped the idle connection")
	conns, _, _ := s.connStats()
	_, _, mails, _, _ := s.counts()
	assert.Equal(t, 2, conns, "connections")
	assert.Equal(t, 2, mails, "MAIL FROM")
}

func TestIdleConnectionIsClosed(t *testing.T) {
	s := startServer(t, script{})
	tr := open(t, s.url("idle_timeout=100ms"))
	_, err := send(t, tr, message())
	require.NoError(t, err)
	eventually(t, "the idle connection is still open", func() bool {
		_, closed, _ := s.connStats()
		return closed == 1
	})
	_, err = send(t, tr, message())
	require.NoError(t, err, "send after the idle close")
	conns, _, _ := s.connStats()
	assert.Equal(t, 2, conns, "connections")
}

func TestPoolBoundsOpenConnections(t *testing.T) {
	t.Parallel()
	s := startServer(t, script{})
	tr := open(t, s.url("pool=2"))
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			_, err := send(t, tr, message())
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	_, _, maxLive := s.connStats()
	assert.LessOrEqual(t, maxLive, 2, "connections open at once, want at most pool=2")
	assert.Len(t, s.mail(), 16, "mails accepted")
}

// TestWaitForPoolHonoursContext: a Send waiting for a busy pool gives up
// when its context ends, before reaching the server.
func TestWaitForPoolHonoursContext(t *testing.T) {
	s := startServer(t, script{at: map[stage]action{atRcpt: {hang: true}}})
	tr := open(t, s.url("pool=1"))
	first, stopFirst := context.WithTimeout(context.Background(), 5*time.Second)
	defer stopFirst()
	busy := make(chan struct{})
	go func() {
		defer close(busy)
		_, _ = tr.Send(first, message())
	}()
	eventually(t, "the first send never reached RCPT", func() bool {
		_, _, _, rcpts, _ := s.counts()
		return rcpts == 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := tr.Send(ctx, message())
	assert.Error(t, err)
	assert.Contains(t, []transport.Kind{transport.Temporary, transport.Connection}, transport.KindOf(err), "kind of %v", err)
	_, _, mails, _, _ := s.counts()
	assert.Equal(t, 1, mails, "MAIL FROM: only the first send's")
	stopFirst()
	<-busy
}

func TestCloseQuitsIdleConnections(t *testing.T) {
	t.Parallel()
	s := startServer(t, script{})
	tr := open(t, s.url(""))
	_, err := send(t, tr, message())
	require.NoError(t, err)
	require.NoError(t, tr.Close())
	eventually(t, "the idle connection outlived Close", func() bool {
		_, closed, _ := s.connStats()
		return closed == 1
	})
	_, err = send(t, tr, message())
	assert.Equal(t, transport.Connection, transport.KindOf(err), "Send after Close: %v", err)
	assert.ErrorIs(t, err, transport.ErrClosed, "Send after Close")
}

// TestEndedContextKeepsThePooledConnection: a Send whose context already
// ended fails without costing the pool its healthy connection.
func TestEndedContextKeepsThePooledConnection(t *testing.T) {
	t.Parallel()
	s := startServer(t, script{})
	tr := open(t, s.url(""))
	_, err := send(t, tr, message())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = tr.Send(ctx, message())
	assert.Equal(t, transport.Temporary, transport.KindOf(err), "send with a cancelled context: %v", err)
	_, err = send(t, tr, message())
	require.NoError(t, err)
	conns, _, _ := s.connStats()
	assert.Equal(t, 1, conns, "connections: the first one reused")
}

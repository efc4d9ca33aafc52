package smtp_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mailspool/mailspool/transport"
)

// eventually polls cond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("after 5s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestConsecutiveSendsReuseOneConnection(t *testing.T) {
	s := startServer(t, script{auth: []string{"PLAIN"}})
	tr := open(t, s.url(""))
	for i := range 5 {
		if _, err := send(t, tr, message()); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	conns, _, _ := s.connStats()
	_, auths, mails, rcpts, _ := s.counts()
	if conns != 1 || auths != 1 || mails != 5 || rcpts != 5 || len(s.mail()) != 5 {
		t.Errorf("server saw %d connections, %d AUTH, %d MAIL, %d RCPT, %d mails; want 1, 1, 5, 5, 5",
			conns, auths, mails, rcpts, len(s.mail()))
	}
	for i, m := range s.mail() {
		if len(m.to) != 1 {
			t.Errorf("mail %d had recipients %q: state leaked between transactions", i, m.to)
		}
	}
}

// TestErrorDiscardsTheSession: after any failure the connection is closed
// and the next message goes out on a fresh one.
func TestErrorDiscardsTheSession(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   stage
		a    action
	}{
		{"reply after data", afterData, action{reply: "451 4.3.0 Try again"}},
		{"reply at rcpt", atRcpt, action{reply: "550 5.1.1 No such user"}},
		{"421 at mail", atMail, action{reply: "421 4.7.0 Closing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, script{})
			tr := open(t, s.url(""))
			s.set(tc.at, tc.a)
			if _, err := send(t, tr, message()); err == nil {
				t.Fatal("first send succeeded, want the scripted failure")
			}
			s.set(tc.at, action{})
			if _, err := send(t, tr, message()); err != nil {
				t.Fatalf("send after a failure: %v", err)
			}
			if conns, closed, _ := s.connStats(); conns != 2 || closed < 1 {
				t.Errorf("server saw %d connections, %d closed; want 2, the first closed", conns, closed)
			}
		})
	}
}

// TestDeadPooledConnectionIsReplaced: a server that closed an idle
// connection costs a redial, not a failed message, and not a second
// transaction.
func TestDeadPooledConnectionIsReplaced(t *testing.T) {
	s := startServer(t, script{auth: []string{"PLAIN"}})
	tr := open(t, s.url(""))
	if _, err := send(t, tr, message()); err != nil {
		t.Fatal(err)
	}
	s.dropAll()
	if _, err := send(t, tr, message()); err != nil {
		t.Fatalf("send after the server dropped the idle connection: %v", err)
	}
	conns, _, _ := s.connStats()
	if _, _, mails, _, _ := s.counts(); conns != 2 || mails != 2 {
		t.Errorf("server saw %d connections and %d MAIL FROM, want 2 and 2", conns, mails)
	}
}

func TestIdleConnectionIsClosed(t *testing.T) {
	s := startServer(t, script{})
	tr := open(t, s.url("idle_timeout=100ms"))
	if _, err := send(t, tr, message()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the idle connection is still open", func() bool {
		_, closed, _ := s.connStats()
		return closed == 1
	})
	if _, err := send(t, tr, message()); err != nil {
		t.Fatalf("send after the idle close: %v", err)
	}
	if conns, _, _ := s.connStats(); conns != 2 {
		t.Errorf("server saw %d connections, want 2", conns)
	}
}

func TestPoolBoundsOpenConnections(t *testing.T) {
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
		if err != nil {
			t.Error(err)
		}
	}
	if _, _, maxLive := s.connStats(); maxLive > 2 {
		t.Errorf("server saw %d connections open at once, want at most pool=2", maxLive)
	}
	if n := len(s.mail()); n != 16 {
		t.Errorf("server accepted %d mails, want 16", n)
	}
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
	if k := transport.KindOf(err); err == nil || k == transport.Permanent {
		t.Errorf("got %v (%s), want a temporary or connection error", err, k)
	}
	if _, _, mails, _, _ := s.counts(); mails != 1 {
		t.Errorf("server saw %d MAIL FROM, want only the first send's", mails)
	}
	stopFirst()
	<-busy
}

func TestCloseQuitsIdleConnections(t *testing.T) {
	s := startServer(t, script{})
	tr := open(t, s.url(""))
	if _, err := send(t, tr, message()); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the idle connection outlived Close", func() bool {
		_, closed, _ := s.connStats()
		return closed == 1
	})
	_, err := send(t, tr, message())
	if k := transport.KindOf(err); k != transport.Connection {
		t.Errorf("Send after Close: %v (%s), want a connection error", err, k)
	}
}

// TestEndedContextKeepsThePooledConnection: a Send whose context already
// ended fails without costing the pool its healthy connection.
func TestEndedContextKeepsThePooledConnection(t *testing.T) {
	s := startServer(t, script{})
	tr := open(t, s.url(""))
	if _, err := send(t, tr, message()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tr.Send(ctx, message()); transport.KindOf(err) != transport.Temporary {
		t.Errorf("send with a cancelled context: %v, want temporary", err)
	}
	if _, err := send(t, tr, message()); err != nil {
		t.Fatal(err)
	}
	if conns, _, _ := s.connStats(); conns != 1 {
		t.Errorf("server saw %d connections, want the first one reused", conns)
	}
}

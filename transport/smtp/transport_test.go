package smtp_test

import (
	"context"
	"errors"
	"net/mail"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mailspool/mailspool/conformance"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/smtp"
)

// open opens the transport for rawURL and closes it when the test ends.
func open(t testing.TB, rawURL string) transport.Transport {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := smtp.URLOpener{}.OpenTransportURL(context.Background(), u)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// message returns a small valid message to zhang@example.net.
func message() *transport.Message {
	return &transport.Message{
		MessageID: transport.NewMessageID("shop@example.com"),
		From:      mail.Address{Name: "Shop", Address: "shop@example.com"},
		To:        mail.Address{Name: "张三", Address: "zhang@example.net"},
		Subject:   "Your order ✓",
		Text:      "Thanks!\n",
	}
}

// send sends m with a generous deadline.
func send(t testing.TB, tr transport.Transport, m *transport.Message) (transport.Receipt, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return tr.Send(ctx, m)
}

// classified returns the *transport.Error in err's chain or fails the test.
func classified(t testing.TB, err error) *transport.Error {
	t.Helper()
	var te *transport.Error
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T) carries no *transport.Error", err, err)
	}
	return te
}

func TestSendAcceptedOverSTARTTLSWithAuth(t *testing.T) {
	s := startServer(t, script{auth: []string{"PLAIN"}})
	tr := open(t, s.url(""))
	m := message()
	rc, err := send(t, tr, m)
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	if rc.MessageID != m.MessageID {
		t.Errorf("receipt message id %q, want %q", rc.MessageID, m.MessageID)
	}
	if rc.Response != "2.0.0 OK: queued as Q1" {
		t.Errorf("receipt response %q, want the 250 text", rc.Response)
	}
	got := s.mail()
	if len(got) != 1 {
		t.Fatalf("server accepted %d mails, want 1", len(got))
	}
	if got[0].from != "shop@example.com" || len(got[0].to) != 1 || got[0].to[0] != "zhang@example.net" {
		t.Errorf("envelope from %q to %q", got[0].from, got[0].to)
	}
	parsed, err := conformance.ParseMIME(got[0].raw)
	if err != nil {
		t.Fatal(err)
	}
	if parsed.Header.Get("Message-Id") != "<"+m.MessageID+">" || parsed.Subject != m.Subject {
		t.Errorf("received Message-Id %q subject %q", parsed.Header.Get("Message-Id"), parsed.Subject)
	}
}

func TestSendImplicitTLS(t *testing.T) {
	s := startServer(t, script{tls: implicitTLS, auth: []string{"PLAIN"}})
	tr := open(t, s.url(""))
	if _, err := send(t, tr, message()); err != nil {
		t.Fatalf("send: %v", err)
	}
	if n := len(s.mail()); n != 1 {
		t.Fatalf("server accepted %d mails, want 1", n)
	}
}

func TestSendAuthLOGINWhenPLAINIsNotOffered(t *testing.T) {
	s := startServer(t, script{auth: []string{"LOGIN"}})
	tr := open(t, s.url(""))
	if _, err := send(t, tr, message()); err != nil {
		t.Fatalf("send: %v", err)
	}
}

func TestSendGeneratesMessageIDWhenEmpty(t *testing.T) {
	s := startServer(t, script{})
	tr := open(t, s.url(""))
	m := message()
	m.MessageID = ""
	rc, err := send(t, tr, m)
	if err != nil {
		t.Fatal(err)
	}
	if m.MessageID != "" {
		t.Errorf("Send set the caller's MessageID to %q", m.MessageID)
	}
	if !strings.HasSuffix(rc.MessageID, "@example.com") {
		t.Errorf("generated id %q, want one in the sender's domain", rc.MessageID)
	}
	got, err := conformance.ParseMIME(s.mail()[0].raw)
	if err != nil {
		t.Fatal(err)
	}
	if h := got.Header.Get("Message-Id"); h != "<"+rc.MessageID+">" {
		t.Errorf("Message-Id header %q, receipt %q: want the same id", h, rc.MessageID)
	}
}

// TestReplies checks the outcome of a reply at every stage of the
// conversation: kind, codes and the reply text as Detail, how far the
// client went, and that nothing is ever "maybe delivered" after a reply.
func TestReplies(t *testing.T) {
	for _, tc := range []struct {
		name     string
		at       stage
		reply    string
		kind     transport.Kind
		code     int
		enhanced string
		detail   string
		mails    int // MAIL FROM the server saw
	}{
		{"421 greeting", atGreeting, "421 4.7.0 Too many connections, try later", transport.Temporary, 421, "4.7.0", "Too many connections, try later", 0},
		{"554 greeting", atGreeting, "554 5.7.1 Your IP is on a blocklist", transport.Permanent, 554, "5.7.1", "Your IP is on a blocklist", 0},
		{"421 ehlo", atEHLO, "421 4.3.2 Service shutting down", transport.Temporary, 421, "4.3.2", "Service shutting down", 0},
		{"451 mail", atMail, "451 4.3.0 Local error in processing", transport.Temporary, 451, "4.3.0", "Local error in processing", 1},
		{"550 rcpt", atRcpt, "550 5.1.1 No such user here", transport.Permanent, 550, "5.1.1", "No such user here", 1},
		{"452 rcpt", atRcpt, "452 4.2.2 Mailbox over quota", transport.Temporary, 452, "4.2.2", "Mailbox over quota", 1},
		{"554 after data", afterData, "554 5.7.1 Message rejected as spam", transport.Permanent, 554, "5.7.1", "Message rejected as spam", 1},
		{"451 after data", afterData, "451 4.7.1 Greylisted, try again in 5 minutes", transport.Temporary, 451, "4.7.1", "Greylisted, try again in 5 minutes", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, script{auth: []string{"PLAIN"}, at: map[stage]action{tc.at: {reply: tc.reply}}})
			tr := open(t, s.url(""))
			_, err := send(t, tr, message())
			te := classified(t, err)
			if te.Kind != tc.kind || te.Code != tc.code || te.Enhanced != tc.enhanced || te.MaybeDelivered {
				t.Errorf("got %s %d %q maybe=%v, want %s %d %q not maybe delivered (%v)",
					te.Kind, te.Code, te.Enhanced, te.MaybeDelivered, tc.kind, tc.code, tc.enhanced, err)
			}
			if !strings.Contains(te.Detail, tc.detail) {
				t.Errorf("Detail %q does not contain the reply text %q", te.Detail, tc.detail)
			}
			if _, _, mails, _, _ := s.counts(); mails != tc.mails {
				t.Errorf("server saw %d MAIL FROM, want %d", mails, tc.mails)
			}
			if n := len(s.mail()); n != 0 {
				t.Errorf("server accepted %d mails, want none", n)
			}
		})
	}
}

func TestWrongPasswordIsConnection(t *testing.T) {
	s := startServer(t, script{auth: []string{"PLAIN"}})
	const wrong = "wrong-p@ssword-42"
	tr := open(t, strings.Replace(s.url(""), urlUser(testUser, testPassword), urlUser(testUser, wrong), 1))
	_, err := send(t, tr, message())
	te := classified(t, err)
	if te.Kind != transport.Connection || te.Code != 535 || te.Enhanced != "5.7.8" {
		t.Errorf("got %s %d %q, want connection 535 5.7.8 (%v)", te.Kind, te.Code, te.Enhanced, err)
	}
	if strings.Contains(err.Error(), wrong) || strings.Contains(te.Detail, wrong) {
		t.Error("the error shows the password")
	}
	if _, auths, mails, _, _ := s.counts(); auths != 1 || mails != 0 {
		t.Errorf("server saw %d AUTH and %d MAIL FROM, want 1 and 0", auths, mails)
	}
}

// TestDrops closes the connection at each stage: only a drop after the
// DATA terminator may have delivered the mail.
func TestDrops(t *testing.T) {
	for _, tc := range []struct {
		at    stage
		maybe bool
	}{
		{atGreeting, false}, {atEHLO, false}, {atMail, false}, {atRcpt, false}, {afterData, true},
	} {
		t.Run(string(tc.at), func(t *testing.T) {
			s := startServer(t, script{auth: []string{"PLAIN"}, at: map[stage]action{tc.at: {drop: true}}})
			tr := open(t, s.url(""))
			_, err := send(t, tr, message())
			te := classified(t, err)
			if te.MaybeDelivered != tc.maybe || te.Kind == transport.Permanent || te.Kind == transport.Sent {
				t.Errorf("got %s maybe=%v, want not permanent, maybe=%v (%v)", te.Kind, te.MaybeDelivered, tc.maybe, err)
			}
			if tc.maybe && te.Kind != transport.Temporary {
				t.Errorf("kind %s after the terminator, want temporary", te.Kind)
			}
		})
	}
}

// TestContextEndsEveryStage hangs the server at each stage: the caller's
// deadline must end the Send promptly, and only a hang after the DATA
// terminator is "maybe delivered".
func TestContextEndsEveryStage(t *testing.T) {
	for _, tc := range []struct {
		at    stage
		maybe bool
	}{
		{atGreeting, false}, {atEHLO, false}, {atMail, false}, {atRcpt, false}, {afterData, true},
	} {
		t.Run(string(tc.at), func(t *testing.T) {
			t.Parallel()
			s := startServer(t, script{auth: []string{"PLAIN"}, at: map[stage]action{tc.at: {hang: true}}})
			tr := open(t, s.url(""))
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := tr.Send(ctx, message())
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("Send returned %v after a 500ms deadline", took)
			}
			te := classified(t, err)
			if te.MaybeDelivered != tc.maybe {
				t.Errorf("maybe delivered %v, want %v (%v)", te.MaybeDelivered, tc.maybe, err)
			}
			want := transport.Connection
			if tc.maybe {
				want = transport.Temporary
			}
			if te.Kind != want {
				t.Errorf("kind %s, want %s (%v)", te.Kind, want, err)
			}
		})
	}
}

func TestCancelDuringSendIsTemporary(t *testing.T) {
	s := startServer(t, script{at: map[stage]action{atRcpt: {hang: true}}})
	tr := open(t, s.url(""))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err := tr.Send(ctx, message())
	if te := classified(t, err); te.Kind != transport.Temporary || te.MaybeDelivered || !errors.Is(err, context.Canceled) {
		t.Errorf("got %s maybe=%v (%v), want temporary, context.Canceled", te.Kind, te.MaybeDelivered, err)
	}
}

// TestTimeoutIsPerCommand: with timeout=300ms and a patient context, a
// server that stops answering mid-transaction fails the Send on the I/O
// timeout.
func TestTimeoutIsPerCommand(t *testing.T) {
	for _, tc := range []struct {
		at    stage
		maybe bool
	}{{atRcpt, false}, {afterData, true}} {
		t.Run(string(tc.at), func(t *testing.T) {
			s := startServer(t, script{at: map[stage]action{tc.at: {hang: true}}})
			tr := open(t, s.url("timeout=300ms"))
			_, err := send(t, tr, message()) // 10 s context
			te := classified(t, err)
			if te.MaybeDelivered != tc.maybe || errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("got %s maybe=%v (%v), want an I/O timeout, maybe=%v", te.Kind, te.MaybeDelivered, err, tc.maybe)
			}
		})
	}
}

// TestTimeoutDoesNotLimitTheWholeSend: the timeout bounds each read and
// write, not the transaction: a session older than the timeout (a slow
// server, a connection kept for reuse) still works.
func TestTimeoutDoesNotLimitTheWholeSend(t *testing.T) {
	s := startServer(t, script{})
	tr := open(t, s.url("timeout=400ms"))
	for i := range 3 {
		if _, err := send(t, tr, message()); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if conns, _, _ := s.connStats(); conns != 1 {
		t.Errorf("server saw %d connections, want 1 reused", conns)
	}
}

package smtp_test

import (
	"context"
	"net/mail"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/conformance"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/smtp"
)

// open opens the transport for rawURL and closes it when the test ends.
func open(t testing.TB, rawURL string) transport.Transport {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	tr, err := smtp.URLOpener{}.OpenTransportURL(context.Background(), u)
	require.NoError(t, err, "open")
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
	require.ErrorAs(t, err, &te, "error %v (%T) carries no *transport.Error", err, err)
	return te
}

func TestSendAcceptedOverSTARTTLSWithAuth(t *testing.T) {
	t.Parallel()
	s := startServer(t, script{auth: []string{"PLAIN"}})
	tr := open(t, s.url(""))
	m := message()
	rc, err := send(t, tr, m)
	require.NoError(t, err, "send")
	assert.Equal(t, m.MessageID, rc.MessageID, "receipt message id")
	assert.Equal(t, "2.0.0 OK: queued as Q1", rc.Response, "receipt response: the 250 text")
	got := s.mail()
	require.Len(t, got, 1, "mails the server accepted")
	assert.Equal(t, "shop@example.com", got[0].from, "envelope from")
	assert.Equal(t, []string{"zhang@example.net"}, got[0].to, "envelope to")
	parsed, err := conformance.ParseMIME(got[0].raw)
	require.NoError(t, err)
	assert.Equal(t, "<"+m.MessageID+">", parsed.Header.Get("Message-Id"), "received Message-Id")
	assert.Equal(t, m.Subject, parsed.Subject, "received subject")
}

func TestSendImplicitTLS(t *testing.T) {
	t.Parallel()
	s := startServer(t, script{tls: implicitTLS, auth: []string{"PLAIN"}})
	tr := open(t, s.url(""))
	_, err := send(t, tr, message())
	require.NoError(t, err, "send")
	require.Len(t, s.mail(), 1, "mails the server accepted")
}

func TestSendAuthLOGINWhenPLAINIsNotOffered(t *testing.T) {
	t.Parallel()
	s := startServer(t, script{auth: []string{"LOGIN"}})
	tr := open(t, s.url(""))
	_, err := send(t, tr, message())
	require.NoError(t, err, "send")
}

func TestSendGeneratesMessageIDWhenEmpty(t *testing.T) {
	t.Parallel()
	s := startServer(t, script{})
	tr := open(t, s.url(""))
	m := message()
	m.MessageID = ""
	rc, err := send(t, tr, m)
	require.NoError(t, err)
	assert.Empty(t, m.MessageID, "Send set the caller's MessageID")
	assert.True(t, strings.HasSuffix(rc.MessageID, "@example.com"), "generated id %q, want one in the sender's domain", rc.MessageID)
	got, err := conformance.ParseMIME(s.mail()[0].raw)
	require.NoError(t, err)
	assert.Equal(t, "<"+rc.MessageID+">", got.Header.Get("Message-Id"), "Message-Id header and receipt: want the same id")
}

// TestReplies checks the outcome of a reply at every stage of the
// conversation: kind, codes and the reply text as Detail, how far the
// client went, and that nothing is ever "maybe delivered" after a reply.
func TestReplies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		at       stage
		reply    string
		kind     transport.Kind
		code     int
		enhanced string
		detail   string
		mails    int // MAIL FROM the server saw
		scope    transport.Scope
	}{
		{"421 greeting", atGreeting, "421 4.7.0 Too many connections, try later", transport.Temporary, 421, "4.7.0", "Too many connections, try later", 0, transport.ScopeTransient},
		// About our IP, not this mail: retried, and the lane's alert.
		{"554 greeting", atGreeting, "554 5.7.1 Your IP is on a blocklist", transport.Temporary, 554, "5.7.1", "Your IP is on a blocklist", 0, transport.ScopeSender},
		{"421 ehlo", atEHLO, "421 4.3.2 Service shutting down", transport.Temporary, 421, "4.3.2", "Service shutting down", 0, transport.ScopeTransient},
		{"451 mail", atMail, "451 4.3.0 Local error in processing", transport.Temporary, 451, "4.3.0", "Local error in processing", 1, transport.ScopeTransient},
		// A relay's 5xx at MAIL FROM is about our sender, whatever its
		// words: there is no recipient yet.
		{"550 mail", atMail, "550 5.1.1 Mailbox unavailable", transport.Temporary, 550, "5.1.1", "Mailbox unavailable", 1, transport.ScopeSender},
		{"552 mail size", atMail, "552 5.3.4 Message size exceeds fixed maximum message size", transport.Permanent, 552, "5.3.4", "Message size exceeds", 1, transport.ScopeMessage},
		{"550 rcpt", atRcpt, "550 5.1.1 No such user here", transport.Permanent, 550, "5.1.1", "No such user here", 1, transport.ScopeRecipient},
		// A relay's words about our account, at RCPT TO.
		{"554 rcpt relay account", atRcpt, "554 5.7.1 Account restricted, contact support", transport.Temporary, 554, "5.7.1", "Account restricted", 1, transport.ScopeSender},
		{"452 rcpt", atRcpt, "452 4.2.2 Mailbox over quota", transport.Temporary, 452, "4.2.2", "Mailbox over quota", 1, transport.ScopeRecipient},
		// A relay (Exchange, Google Workspace) refusing our account or
		// our sender, in words that name a user or "does not have":
		// never about the recipient, whose address would be suppressed.
		{"550 rcpt submit denied", atRcpt, "550 5.7.1 Client does not have permissions to submit to this server", transport.Connection, 550, "5.7.1", "permissions to submit", 1, transport.ScopeLane},
		{"550 rcpt domain policy", atRcpt, "550 5.7.1 The user or domain that you are sending to (or from) has a policy that prohibited the mail that you sent.", transport.Temporary, 550, "5.7.1", "has a policy", 1, transport.ScopeSender},
		{"550 after data send on behalf", afterData, "550 5.7.1 Client does not have permissions to send on behalf of the from address", transport.Temporary, 550, "5.7.1", "send on behalf", 1, transport.ScopeSender},
		{"554 after data", afterData, "554 5.7.1 Message rejected as spam", transport.Permanent, 554, "5.7.1", "Message rejected as spam", 1, transport.ScopeMessage},
		{"451 after data", afterData, "451 4.7.1 Greylisted, try again in 5 minutes", transport.Temporary, 451, "4.7.1", "Greylisted, try again in 5 minutes", 1, transport.ScopeTransient},
	} {
		// The envelope as one pipelined group (go-smtp offers PIPELINING,
		// here over STARTTLS), and one command at a time.
		for _, sc := range []script{{}, {tls: noTLS, noPipelining: true}} {
			sc.auth, sc.at = []string{"PLAIN"}, map[stage]action{tc.at: {reply: tc.reply}}
			name := tc.name
			if sc.noPipelining {
				name += ", no pipelining"
			}
			t.Run(name, func(t *testing.T) {
				s := startServer(t, sc)
				tr := open(t, s.url(""))
				_, err := send(t, tr, message())
				te := classified(t, err)
				assert.Equal(t, tc.kind, te.Kind, "kind of %v", err)
				assert.Equal(t, tc.scope, te.Scope, "scope of %v", err)
				assert.Equal(t, tc.code, te.Code, "code of %v", err)
				assert.Equal(t, tc.enhanced, te.Enhanced, "enhanced code of %v", err)
				assert.False(t, te.MaybeDelivered, "maybe delivered after a reply: %v", err)
				assert.Contains(t, te.Detail, tc.detail, "Detail holds the reply text")
				_, _, mails, _, _ := s.counts()
				assert.Equal(t, tc.mails, mails, "MAIL FROM the server saw")
				assert.Empty(t, s.mail(), "mails the server accepted")
			})
		}
	}
}

func TestWrongPasswordIsConnection(t *testing.T) {
	t.Parallel()
	s := startServer(t, script{auth: []string{"PLAIN"}})
	const wrong = "wrong-p@ssword-42"
	tr := open(t, strings.Replace(s.url(""), urlUser(testUser, testPassword), urlUser(testUser, wrong), 1))
	_, err := send(t, tr, message())
	te := classified(t, err)
	assert.Equal(t, transport.Connection, te.Kind, "kind of %v", err)
	assert.Equal(t, 535, te.Code, "code of %v", err)
	assert.Equal(t, "5.7.8", te.Enhanced, "enhanced code of %v", err)
	assert.NotContains(t, err.Error(), wrong, "the error shows the password")
	assert.NotContains(t, te.Detail, wrong, "the Detail shows the password")
	_, auths, mails, _, _ := s.counts()
	assert.Equal(t, 1, auths, "AUTH the server saw")
	assert.Zero(t, mails, "MAIL FROM the server saw")
}

// TestDrops closes the connection at each stage: only a drop after the
// DATA terminator may have delivered the mail.
func TestDrops(t *testing.T) {
	t.Parallel()
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
			assert.Equal(t, tc.maybe, te.MaybeDelivered, "maybe delivered (%v)", err)
			assert.NotContains(t, []transport.Kind{transport.Permanent, transport.Sent}, te.Kind, "kind of %v", err)
			if tc.maybe {
				assert.Equal(t, transport.Temporary, te.Kind, "kind after the terminator")
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
			// The deadline leaves a busy machine time to reach the stage
			// (as the conformance suite's stallDeadline does); the hang
			// lasts until the test ends.
			const deadline = 1500 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			start := time.Now()
			_, err := tr.Send(ctx, message())
			assert.LessOrEqual(t, time.Since(start), deadline+4500*time.Millisecond, "Send returned long after a %v deadline", deadline)
			te := classified(t, err)
			assert.Equal(t, tc.maybe, te.MaybeDelivered, "maybe delivered (%v)", err)
			want := transport.Connection
			if tc.maybe {
				want = transport.Temporary
			}
			assert.Equal(t, want, te.Kind, "kind of %v", err)
		})
	}
}

func TestCancelDuringSendIsTemporary(t *testing.T) {
	s := startServer(t, script{at: map[stage]action{atRcpt: {hang: true}}})
	tr := open(t, s.url(""))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := tr.Send(ctx, message())
		done <- err
	}()
	// Cancel mid-transaction, once the server holds the RCPT, however long
	// getting there took on a busy machine: an earlier cancel would end the
	// Send in the connection setup instead.
	eventually(t, "the send never reached RCPT", func() bool {
		_, _, _, rcpts, _ := s.counts()
		return rcpts == 1
	})
	cancel()
	err := <-done
	te := classified(t, err)
	assert.Equal(t, transport.Temporary, te.Kind, "kind of %v", err)
	assert.False(t, te.MaybeDelivered, "maybe delivered (%v)", err)
	assert.ErrorIs(t, err, context.Canceled)
}

// TestTimeoutIsPerCommand: with timeout=1500ms and a patient context, a
// server that stops answering mid-transaction fails the Send on the I/O
// timeout.
func TestTimeoutIsPerCommand(t *testing.T) {
	for _, tc := range []struct {
		at    stage
		maybe bool
	}{{atRcpt, false}, {afterData, true}} {
		t.Run(string(tc.at), func(t *testing.T) {
			t.Parallel()
			s := startServer(t, script{at: map[stage]action{tc.at: {hang: true}}})
			// Every command before the hang must be answered within the
			// timeout, so it leaves a busy machine room (as the conformance
			// suite's stallDeadline does); the hang lasts until the test ends.
			tr := open(t, s.url("timeout=1500ms"))
			_, err := send(t, tr, message()) // 10 s context
			te := classified(t, err)
			assert.Equal(t, tc.maybe, te.MaybeDelivered, "maybe delivered (%v)", err)
			assert.NotErrorIs(t, err, context.DeadlineExceeded, "want an I/O timeout, not the context's deadline")
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
		_, err := send(t, tr, message())
		require.NoError(t, err, "send %d", i)
		time.Sleep(250 * time.Millisecond)
	}
	conns, _, _ := s.connStats()
	assert.Equal(t, 1, conns, "connections the server saw: want 1 reused")
}

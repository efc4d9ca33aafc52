package smtp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"log"
	"log/slog"
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

// TestNoSTARTTLSGetsNoCredentialsAndNoMail: a server (or a man in the
// middle) that does not offer STARTTLS never sees AUTH, MAIL FROM or DATA.
func TestNoSTARTTLSGetsNoCredentialsAndNoMail(t *testing.T) {
	t.Parallel()
	s := startServer(t, script{tls: noTLS, auth: []string{"PLAIN", "LOGIN"}})
	tr := open(t, "smtp://"+urlUser(testUser, testPassword)+s.addr)
	_, err := send(t, tr, message())
	te := classified(t, err)
	assert.Equal(t, transport.Connection, te.Kind, "kind of %v", err)
	assert.False(t, te.MaybeDelivered, "maybe delivered (%v)", err)
	_, auths, mails, _, datas := s.counts()
	assert.Zero(t, auths, "AUTH without TLS")
	assert.Zero(t, mails, "MAIL FROM without TLS")
	assert.Zero(t, datas, "DATA without TLS")
}

func TestUntrustedCertificateGetsNothing(t *testing.T) {
	t.Parallel()
	for name, mode := range map[string]serverTLS{"starttls": untrustedTLS, "implicit": implicitUntrust} {
		t.Run(name, func(t *testing.T) {
			s := startServer(t, script{tls: mode, auth: []string{"PLAIN"}})
			tr := open(t, s.url(""))
			_, err := send(t, tr, message())
			te := classified(t, err)
			assert.Equal(t, transport.Connection, te.Kind, "kind of %v", err)
			assert.Contains(t, te.Detail, "certificate", "want an error about the certificate")
			_, auths, mails, _, _ := s.counts()
			assert.Zero(t, auths, "AUTH")
			assert.Zero(t, mails, "MAIL FROM")
		})
	}
}

func TestServerNameIsVerified(t *testing.T) {
	t.Parallel()
	s := startServer(t, script{})
	_, err := send(t, open(t, s.url("server_name=mx.test")), message())
	assert.NoError(t, err, "server_name matching the certificate")
	_, err = send(t, open(t, s.url("server_name=other.example")), message())
	assert.Equal(t, transport.Connection, transport.KindOf(err), "server_name not in the certificate: %v", err)
	_, _, mails, _, _ := s.counts()
	assert.Equal(t, 1, mails, "MAIL FROM")
}

func TestPlaintextCredentialsOnlyToLoopback(t *testing.T) {
	t.Parallel()
	u, _ := url.Parse("smtp://" + urlUser(testUser, testPassword) + "mail.example.com?tls=none")
	_, err := smtp.URLOpener{}.OpenTransportURL(context.Background(), u)
	if assert.ErrorContains(t, err, "in clear", "tls=none with a password to a remote host: want refused") {
		assert.False(t, strings.Contains(err.Error(), testPassword), "the error shows the password")
	}

	s := startServer(t, script{tls: noTLS, auth: []string{"PLAIN"}})
	_, err = send(t, open(t, s.url("")), message())
	assert.NoError(t, err, "tls=none with a password to 127.0.0.1")
}

// TestInjectionIsRefusedBeforeConnecting: CR or LF in any header field or
// address makes Send fail as Permanent without touching the server.
func TestInjectionIsRefusedBeforeConnecting(t *testing.T) {
	t.Parallel()
	s := startServer(t, script{})
	tr := open(t, s.url(""))
	for name, edit := range map[string]func(m *transport.Message){
		"to address": func(m *transport.Message) { m.To.Address = "zhang@example.net>\r\nRCPT TO:<victim@example.org" },
		"to name":    func(m *transport.Message) { m.To.Name = "Zhang\r\nBcc: victim@example.org" },
		"from name":  func(m *transport.Message) { m.From.Name = "Shop\nBcc: victim@example.org" },
		"subject":    func(m *transport.Message) { m.Subject = "Hi\r\nBcc: victim@example.org" },
		"header": func(m *transport.Message) {
			m.Headers = []transport.Header{{Name: "X-A", Value: "1\r\nBcc: victim@example.org"}}
		},
		"header name": func(m *transport.Message) {
			m.Headers = []transport.Header{{Name: "Bcc: victim@example.org\r\nX-A", Value: "1"}}
		},
		"reserved header": func(m *transport.Message) { m.Headers = []transport.Header{{Name: "BCC", Value: "victim@example.org"}} },
	} {
		t.Run(name, func(t *testing.T) {
			m := message()
			edit(m)
			_, err := send(t, tr, m)
			assert.ErrorIs(t, err, transport.ErrInvalidMessage)
			assert.Equal(t, transport.Permanent, transport.KindOf(err), "kind of %v", err)
		})
	}
	conns, _, _ := s.connStats()
	assert.Zero(t, conns, "connections")
}

// TestValidButHostileFieldsStayInTheirField: what Validate lets through
// (header-like text, commas and angle brackets in names, tabs) reaches the
// server as data, for exactly one recipient.
func TestValidButHostileFieldsStayInTheirField(t *testing.T) {
	t.Parallel()
	s := startServer(t, script{})
	tr := open(t, s.url(""))
	m := message()
	m.To.Name = "Eve <victim@example.org>, Bcc: victim@example.org"
	m.From.Name = `Shop" <victim@example.org>`
	m.Subject = "Bcc: victim@example.org\tRCPT TO:<victim@example.org>"
	m.Headers = []transport.Header{{Name: "X-Note", Value: "Bcc: victim@example.org, <victim@example.org>"}}
	_, err := send(t, tr, m)
	require.NoError(t, err)
	_, _, _, rcpts, _ := s.counts()
	assert.Equal(t, 1, rcpts, "RCPT TO")
	got := s.mail()[0]
	assert.Equal(t, []string{m.To.Address}, got.to, "envelope recipients")
	r, err := conformance.ParseMIME(got.raw)
	require.NoError(t, err)
	assert.Equal(t, []string{m.To.Address}, r.To, "To header: one address")
	assert.Equal(t, m.To.Name, r.ToName, "To name kept")
	assert.Equal(t, m.From.Name, r.FromName, "From name as sent")
	assert.Equal(t, m.Subject, r.Subject, "Subject as sent")
	assert.Equal(t, m.Headers[0].Value, r.Header.Get("X-Note"), "X-Note as sent")
	assert.Empty(t, r.Header.Values("Bcc"), "a Bcc header arrived")
}

// TestNoSMTPSmuggling: a body with bare-LF dot lines and SMTP commands in
// it arrives as one message with its text intact, and the server sees one
// transaction.
func TestNoSMTPSmuggling(t *testing.T) {
	t.Parallel()
	s := startServer(t, script{})
	tr := open(t, s.url(""))
	m := message()
	m.Text = "hello\n.\nMAIL FROM:<evil@example.org>\nRCPT TO:<victim@example.org>\nDATA\nSubject: smuggled\n\nowned\n.\r\n" +
		"QUIT\r\n.\r\nand\n.\r\n..\nend\n"
	_, err := send(t, tr, m)
	require.NoError(t, err)
	require.NoError(t, tr.Close())
	eventually(t, "the server still has the connection open", func() bool {
		_, closed, _ := s.connStats()
		return closed == 1
	})
	_, _, mails, rcpts, datas := s.counts()
	assert.Equal(t, 1, mails, "MAIL FROM: one transaction")
	assert.Equal(t, 1, rcpts, "RCPT TO: one transaction")
	assert.Equal(t, 1, datas, "DATA: one transaction")
	got := s.mail()
	require.Len(t, got, 1, "mails accepted")
	r, err := conformance.ParseMIME(got[0].raw)
	require.NoError(t, err)
	assert.Equal(t, strings.ReplaceAll(m.Text, "\r\n", "\n"), r.Text, "text as it arrived")
}

// TestPasswordNeverShown: in every error a wrong setup or a failing server
// produces, in any Detail of its chain and in anything logged, the password
// does not appear, in clear or URL-escaped.
func TestPasswordNeverShown(t *testing.T) {
	var logs bytes.Buffer
	defer log.SetOutput(log.Writer())
	defer slog.SetDefault(slog.Default())
	log.SetOutput(&logs)
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))

	const secret = "Pa55:w/rd@%41-very-secret"
	user := urlUser(testUser, secret)
	var mux transport.Mux
	mux.Register("smtp", smtp.URLOpener{})
	mux.Register("smtps", smtp.URLOpener{})
	var errs []error
	for _, raw := range []string{
		"smtp://" + user + "mail.example.com?tls=none",
		"smtp://" + user + "mail.example.com?bogus=1",
		"smtp://" + user + "mail.example.com:99999",
		"smtp://" + user + "mail.example.com?timeout=soon",
		"smtps://" + user + "mail.example.com?tls=starttls",
		"smtp://" + user + "mail.example.com?password_env=X",
		"smtp://" + user + "mail.example.com?ca_file=/nonexistent",
		"smtp://" + user + "mail.example.com/path",
		"smtp://" + user + "[::1",
	} {
		_, err := mux.OpenTransport(context.Background(), raw)
		if assert.Error(t, err, "%s opened, want an error", transport.Redact(raw)) {
			errs = append(errs, err)
		}
	}
	for _, sc := range []script{
		{auth: []string{"PLAIN"}}, // 535: the password is wrong
		{auth: []string{"LOGIN"}}, // 535 through LOGIN
		// Servers that quote the refused AUTH line, base64 as sent.
		{auth: []string{"PLAIN"}, echoAuth: true},
		{auth: []string{"LOGIN"}, echoAuth: true},
		{tls: untrustedTLS, auth: []string{"PLAIN"}},
		{tls: noTLS, auth: []string{"PLAIN"}}, // STARTTLS missing
		{auth: []string{"PLAIN"}, at: map[stage]action{afterData: {drop: true}}},
	} {
		s := startServer(t, sc)
		u := strings.Replace(s.url(""), urlUser(testUser, testPassword), user, 1)
		if sc.tls == noTLS {
			u = "smtp://" + user + s.addr
		}
		tr, err := mux.OpenTransport(context.Background(), u)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = tr.Send(ctx, message())
		cancel()
		_ = tr.Close()
		if assert.Error(t, err, "send succeeded with the wrong password") {
			errs = append(errs, err)
		}
	}
	forms := []string{secret, url.QueryEscape(secret), url.PathEscape(secret),
		base64.RawStdEncoding.EncodeToString([]byte("\x00" + testUser + "\x00" + secret)),
		base64.RawStdEncoding.EncodeToString([]byte(secret))}
	for _, err := range errs {
		texts := []string{err.Error()}
		for e := err; e != nil; e = errors.Unwrap(e) {
			if te, ok := e.(*transport.Error); ok {
				texts = append(texts, te.Detail)
			}
		}
		for _, text := range texts {
			for _, f := range forms {
				// Not assert.NotContains: its message would print the password.
				assert.False(t, strings.Contains(text, f), "an error shows the password: %s", strings.ReplaceAll(text, f, "<secret>"))
			}
		}
	}
	for _, f := range forms {
		assert.False(t, strings.Contains(logs.String(), f), "a log line shows the password")
	}
	assert.Zero(t, logs.Len(), "the transport logged: %q", logs.String())
}

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

	"github.com/mailspool/mailspool/conformance"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/smtp"
)

// TestNoSTARTTLSGetsNoCredentialsAndNoMail: a server (or a man in the
// middle) that does not offer STARTTLS never sees AUTH, MAIL FROM or DATA.
func TestNoSTARTTLSGetsNoCredentialsAndNoMail(t *testing.T) {
	s := startServer(t, script{tls: noTLS, auth: []string{"PLAIN", "LOGIN"}})
	tr := open(t, "smtp://"+urlUser(testUser, testPassword)+s.addr)
	_, err := send(t, tr, message())
	if te := classified(t, err); te.Kind != transport.Connection || te.MaybeDelivered {
		t.Errorf("got %v, want a connection error", err)
	}
	if _, auths, mails, _, datas := s.counts(); auths+mails+datas != 0 {
		t.Errorf("server saw %d AUTH, %d MAIL FROM, %d DATA without TLS, want none", auths, mails, datas)
	}
}

func TestUntrustedCertificateGetsNothing(t *testing.T) {
	for name, mode := range map[string]serverTLS{"starttls": untrustedTLS, "implicit": implicitUntrust} {
		t.Run(name, func(t *testing.T) {
			s := startServer(t, script{tls: mode, auth: []string{"PLAIN"}})
			tr := open(t, s.url(""))
			_, err := send(t, tr, message())
			if te := classified(t, err); te.Kind != transport.Connection || !strings.Contains(te.Detail, "certificate") {
				t.Errorf("got %v, want a connection error about the certificate", err)
			}
			if _, auths, mails, _, _ := s.counts(); auths+mails != 0 {
				t.Errorf("server saw %d AUTH and %d MAIL FROM, want none", auths, mails)
			}
		})
	}
}

func TestServerNameIsVerified(t *testing.T) {
	s := startServer(t, script{})
	if _, err := send(t, open(t, s.url("server_name=mx.test")), message()); err != nil {
		t.Errorf("server_name matching the certificate: %v", err)
	}
	_, err := send(t, open(t, s.url("server_name=other.example")), message())
	if k := transport.KindOf(err); k != transport.Connection {
		t.Errorf("server_name not in the certificate: %v (%s), want a connection error", err, k)
	}
	if _, _, mails, _, _ := s.counts(); mails != 1 {
		t.Errorf("server saw %d MAIL FROM, want 1", mails)
	}
}

func TestPlaintextCredentialsOnlyToLoopback(t *testing.T) {
	u, _ := url.Parse("smtp://" + urlUser(testUser, testPassword) + "mail.example.com?tls=none")
	_, err := smtp.URLOpener{}.OpenTransportURL(context.Background(), u)
	if err == nil || !strings.Contains(err.Error(), "in clear") {
		t.Errorf("tls=none with a password to a remote host: %v, want refused", err)
	}
	if err != nil && strings.Contains(err.Error(), testPassword) {
		t.Error("the error shows the password")
	}

	s := startServer(t, script{tls: noTLS, auth: []string{"PLAIN"}})
	if _, err := send(t, open(t, s.url("")), message()); err != nil {
		t.Errorf("tls=none with a password to 127.0.0.1: %v", err)
	}
}

// TestInjectionIsRefusedBeforeConnecting: CR or LF in any header field or
// address makes Send fail as Permanent without touching the server.
func TestInjectionIsRefusedBeforeConnecting(t *testing.T) {
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
			if !errors.Is(err, transport.ErrInvalidMessage) || transport.KindOf(err) != transport.Permanent {
				t.Errorf("got %v (%s), want a permanent invalid-message error", err, transport.KindOf(err))
			}
		})
	}
	if conns, _, _ := s.connStats(); conns != 0 {
		t.Errorf("server saw %d connections, want none", conns)
	}
}

// TestValidButHostileFieldsStayInTheirField: what Validate lets through
// (header-like text, commas and angle brackets in names, tabs) reaches the
// server as data, for exactly one recipient.
func TestValidButHostileFieldsStayInTheirField(t *testing.T) {
	s := startServer(t, script{})
	tr := open(t, s.url(""))
	m := message()
	m.To.Name = "Eve <victim@example.org>, Bcc: victim@example.org"
	m.From.Name = `Shop" <victim@example.org>`
	m.Subject = "Bcc: victim@example.org\tRCPT TO:<victim@example.org>"
	m.Headers = []transport.Header{{Name: "X-Note", Value: "Bcc: victim@example.org, <victim@example.org>"}}
	if _, err := send(t, tr, m); err != nil {
		t.Fatal(err)
	}
	if _, _, _, rcpts, _ := s.counts(); rcpts != 1 {
		t.Errorf("server saw %d RCPT TO, want 1", rcpts)
	}
	got := s.mail()[0]
	if len(got.to) != 1 || got.to[0] != m.To.Address {
		t.Errorf("envelope recipients %q, want only %q", got.to, m.To.Address)
	}
	r, err := conformance.ParseMIME(got.raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.To) != 1 || r.To[0] != m.To.Address || r.ToName != m.To.Name {
		t.Errorf("To header %q name %q, want one address with the name kept", r.To, r.ToName)
	}
	if r.FromName != m.From.Name || r.Subject != m.Subject || r.Header.Get("X-Note") != m.Headers[0].Value {
		t.Errorf("From name %q, Subject %q, X-Note %q: not as sent", r.FromName, r.Subject, r.Header.Get("X-Note"))
	}
	if v := r.Header.Values("Bcc"); len(v) != 0 {
		t.Errorf("a Bcc header arrived: %q", v)
	}
}

// TestNoSMTPSmuggling: a body with bare-LF dot lines and SMTP commands in
// it arrives as one message with its text intact, and the server sees one
// transaction.
func TestNoSMTPSmuggling(t *testing.T) {
	s := startServer(t, script{})
	tr := open(t, s.url(""))
	m := message()
	m.Text = "hello\n.\nMAIL FROM:<evil@example.org>\nRCPT TO:<victim@example.org>\nDATA\nSubject: smuggled\n\nowned\n.\r\n" +
		"QUIT\r\n.\r\nand\n.\r\n..\nend\n"
	if _, err := send(t, tr, m); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the server still has the connection open", func() bool {
		_, closed, _ := s.connStats()
		return closed == 1
	})
	if _, _, mails, rcpts, datas := s.counts(); mails != 1 || rcpts != 1 || datas != 1 {
		t.Errorf("server saw %d MAIL FROM, %d RCPT TO, %d DATA; want one transaction", mails, rcpts, datas)
	}
	got := s.mail()
	if len(got) != 1 {
		t.Fatalf("server accepted %d mails, want 1", len(got))
	}
	r, err := conformance.ParseMIME(got[0].raw)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.ReplaceAll(m.Text, "\r\n", "\n"); r.Text != want {
		t.Errorf("text arrived as %q, want %q", r.Text, want)
	}
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
		if _, err := mux.OpenTransport(context.Background(), raw); err != nil {
			errs = append(errs, err)
		} else {
			t.Errorf("%s opened, want an error", transport.Redact(raw))
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
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = tr.Send(ctx, message())
		cancel()
		_ = tr.Close()
		if err == nil {
			t.Errorf("send succeeded with the wrong password")
			continue
		}
		errs = append(errs, err)
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
				if strings.Contains(text, f) {
					t.Errorf("an error shows the password (%s): %s", f, strings.ReplaceAll(text, f, "<secret>"))
				}
			}
		}
	}
	for _, f := range forms {
		if strings.Contains(logs.String(), f) {
			t.Error("a log line shows the password")
		}
	}
	if logs.Len() != 0 {
		t.Errorf("the transport logged: %q", logs.String())
	}
}

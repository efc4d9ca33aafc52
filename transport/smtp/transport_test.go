package smtp_test

import (
	"context"
	"errors"
	"net/mail"
	"net/url"
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

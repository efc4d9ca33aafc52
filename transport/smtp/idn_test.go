package smtp_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/mailspool/mailspool/transport"
)

// TestIDNWithoutSMTPUTF8: a server without SMTPUTF8 gets internationalized
// domains as A-labels, in the envelope and in the header fields.
func TestIDNWithoutSMTPUTF8(t *testing.T) {
	s := startServer(t, script{})
	tr := open(t, s.url(""))
	m := message()
	m.To.Address = "b@bücher.example"
	if _, err := send(t, tr, m); err != nil {
		t.Fatal(err)
	}
	got := s.mail()
	if len(got) != 1 || len(got[0].to) != 1 {
		t.Fatalf("server got %+v", got)
	}
	if got[0].to[0] != "b@xn--bcher-kva.example" {
		t.Errorf("RCPT TO:<%s>, want the A-label b@xn--bcher-kva.example", got[0].to[0])
	}
	if !strings.Contains(string(got[0].raw), "b@xn--bcher-kva.example") || strings.Contains(string(got[0].raw), "bücher") {
		t.Errorf("the To header is not in A-labels:\n%s", got[0].raw)
	}
}

// TestNonASCIILocalPartWithoutSMTPUTF8: a local part that is not ASCII
// cannot be written to a server without SMTPUTF8; the send fails as
// Permanent, saying why, before any RCPT TO.
func TestNonASCIILocalPartWithoutSMTPUTF8(t *testing.T) {
	s := startServer(t, script{})
	tr := open(t, s.url(""))
	m := message()
	m.To.Address = "jürgen@example.com"
	_, err := send(t, tr, m)
	te := classified(t, err)
	if te.Kind != transport.Permanent || !strings.Contains(err.Error(), "SMTPUTF8") || !errors.Is(err, transport.ErrInvalidMessage) {
		t.Errorf("got %v, want a Permanent error naming SMTPUTF8", err)
	}
	if _, _, mails, rcpts, _ := s.counts(); mails != 0 || rcpts != 0 {
		t.Errorf("server saw %d MAIL FROM and %d RCPT TO, want none", mails, rcpts)
	}
	// The connection is still good for the next mail.
	if _, err := send(t, tr, message()); err != nil {
		t.Fatal(err)
	}
}

// TestNonASCIISenderWithoutSMTPUTF8: our own address with a local part
// that is not ASCII cannot be written to a server without SMTPUTF8
// either, but that is about the lane's sender, not the mail: Temporary,
// of sender scope (the mail waits, the lane's sender alert fires), never
// the Permanent failure of every mail of the lane.
func TestNonASCIISenderWithoutSMTPUTF8(t *testing.T) {
	s := startServer(t, script{})
	tr := open(t, s.url(""))
	m := message()
	m.From.Address = "bücher@example.com"
	_, err := send(t, tr, m)
	te := classified(t, err)
	if te.Kind != transport.Temporary || te.Scope != transport.ScopeSender || !strings.Contains(err.Error(), "SMTPUTF8") {
		t.Errorf("got %v (%v, %v), want a Temporary error of sender scope naming SMTPUTF8", err, te.Kind, te.Scope)
	}
	if _, _, mails, rcpts, _ := s.counts(); mails != 0 || rcpts != 0 {
		t.Errorf("server saw %d MAIL FROM and %d RCPT TO, want none", mails, rcpts)
	}
}

// TestUTF8AddressesWithSMTPUTF8: a server with SMTPUTF8 gets the addresses
// as they are.
func TestUTF8AddressesWithSMTPUTF8(t *testing.T) {
	s := startServer(t, script{utf8: true})
	tr := open(t, s.url(""))
	m := message()
	m.To.Address = "jürgen@bücher.example"
	if _, err := send(t, tr, m); err != nil {
		t.Fatal(err)
	}
	if got := s.mail(); len(got) != 1 || got[0].to[0] != "jürgen@bücher.example" {
		t.Errorf("server got %+v", got)
	}
}

package render

import (
	"errors"
	"net/mail"
	"strings"
	"testing"

	"github.com/mailspool/mailspool/transport"
)

func TestASCII(t *testing.T) {
	m := &transport.Message{
		From:    mail.Address{Name: "Bücherei", Address: "post@bücher.example"},
		To:      mail.Address{Address: "b@münchen.example"},
		ReplyTo: mail.Address{Address: "r@example.com"},
		Subject: "s", Text: "t",
	}
	got, err := ASCII(m)
	if err != nil {
		t.Fatal(err)
	}
	if got.From.Address != "post@xn--bcher-kva.example" || got.To.Address != "b@xn--mnchen-3ya.example" || got.ReplyTo.Address != "r@example.com" {
		t.Errorf("ASCII = %+v", got)
	}
	if got.From.Name != "Bücherei" || m.To.Address != "b@münchen.example" {
		t.Error("names must stay, and m must not change")
	}
	plain := &transport.Message{From: mail.Address{Address: "a@example.com"}, To: mail.Address{Address: "b@example.com"}, Text: "t"}
	if got, _ := ASCII(plain); got != plain {
		t.Error("an ASCII message is returned as it is")
	}

	m.To.Address = "jürgen@example.com"
	_, err = ASCII(m)
	if !errors.Is(err, transport.ErrInvalidMessage) || !strings.Contains(err.Error(), "to.address") || !strings.Contains(err.Error(), "SMTPUTF8") {
		t.Errorf("non-ASCII local part: %v", err)
	}
}

package render

import (
	"fmt"
	"net/mail"
	"strings"

	"golang.org/x/net/idna"

	"github.com/mailspool/mailspool/transport"
)

// ASCII returns m with every address in 7-bit ASCII, for a server or API
// without SMTPUTF8 (RFC 6531): an internationalized domain is written as
// its A-label ("bücher.example" → "xn--bcher-kva.example"). A local part
// that is not ASCII cannot be written without SMTPUTF8; that is an error
// matching [transport.ErrInvalidMessage] that says so. m itself is not
// changed; when it is all ASCII already, m is returned. m is validated
// first ([transport.Message.Validate]).
func ASCII(m *transport.Message) (*transport.Message, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	out := *m
	for _, a := range []struct {
		field string
		addr  *mail.Address
	}{{"from", &out.From}, {"to", &out.To}, {"reply_to", &out.ReplyTo}} {
		s, err := asciiAddress(a.addr.Address)
		if err != nil {
			return nil, &transport.ValidationError{Field: a.field + ".address", Reason: err.Error()}
		}
		a.addr.Address = s
	}
	if out.ReturnPath != "" {
		s, err := asciiAddress(out.ReturnPath)
		if err != nil {
			return nil, &transport.ValidationError{Field: "return_path", Reason: err.Error()}
		}
		out.ReturnPath = s
	}
	if out.From == m.From && out.To == m.To && out.ReplyTo == m.ReplyTo && out.ReturnPath == m.ReturnPath {
		return m, nil
	}
	return &out, nil
}

func asciiAddress(addr string) (string, error) {
	if isASCII(addr) {
		return addr, nil
	}
	at := strings.LastIndexByte(addr, '@')
	local, domain := addr[:at], addr[at+1:]
	if !isASCII(local) {
		return "", fmt.Errorf("%q has a local part that is not ASCII, which needs SMTPUTF8 and the server does not offer it", addr)
	}
	a, err := idna.Lookup.ToASCII(domain)
	if err != nil {
		return "", fmt.Errorf("%q: the domain is not a valid internationalized domain name: %v", addr, err)
	}
	return local + "@" + a, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

package render

import (
	"errors"
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
			return nil, notASCII(a.field+".address", err)
		}
		a.addr.Address = s
	}
	if out.ReturnPath != "" {
		s, err := asciiAddress(out.ReturnPath)
		if err != nil {
			return nil, notASCII("return_path", err)
		}
		out.ReturnPath = s
	}
	if out.From == m.From && out.To == m.To && out.ReplyTo == m.ReplyTo && out.ReturnPath == m.ReturnPath {
		return m, nil
	}
	return &out, nil
}

// unwritableAddress is ASCII's error for an address it cannot write
// without SMTPUTF8: the validation error (it matches
// [transport.ErrInvalidMessage]), of a type Unwritable recognizes.
type unwritableAddress struct{ *transport.ValidationError }

func (e unwritableAddress) Unwrap() error { return e.ValidationError }

func notASCII(field string, err error) error {
	return unwritableAddress{&transport.ValidationError{Field: field, Reason: err.Error()}}
}

// Unwritable is the outcome of ASCII's error err for a transport that
// sends to where (a host, "SES"), or nil when err is not about an address
// ASCII could not write. The recipient's address is a Permanent error
// about this mail. Our own (from, reply-to, return path) is about the
// lane's sender: Temporary, so that the lane's mail waits and its sender
// alert fires, instead of every mail of the lane failing for a setting of
// ours.
func Unwritable(err error, where string) *transport.Error {
	var ua unwritableAddress
	if !errors.As(err, &ua) {
		return nil
	}
	if strings.HasPrefix(ua.Field, "to.") {
		return &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeMessage, Rule: "no-smtputf8", Detail: "the recipient's address cannot be sent to " + where + " (no SMTPUTF8)", Err: err}
	}
	return &transport.Error{Kind: transport.Temporary, Scope: transport.ScopeSender, Rule: "no-smtputf8", Detail: "our address cannot be sent to " + where + " (no SMTPUTF8)", Err: err}
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

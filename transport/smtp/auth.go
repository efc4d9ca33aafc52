package smtp

import (
	"errors"
	"slices"

	mailsmtp "github.com/wneessen/go-mail/smtp"
)

var (
	// errAuthNeedsTLS: the connection is not encrypted and plaintext
	// credentials were not allowed (tls=none to a loopback host).
	errAuthNeedsTLS = errors.New("smtp: refusing to send credentials over a connection without TLS")
	// errNoAuthMechanism: the server offers neither PLAIN nor LOGIN.
	errNoAuthMechanism = errors.New("smtp: server offers no AUTH mechanism this client supports (PLAIN, LOGIN)")
)

// auth is an mailsmtp.Auth for one session: it refuses to start without TLS
// unless plaintext is allowed, then uses PLAIN, or LOGIN when the server
// does not offer PLAIN.
type auth struct {
	username, password string
	allowPlaintext     bool
	mech               mailsmtp.Auth
}

// Start picks the mechanism for server and starts it.
func (a *auth) Start(server *mailsmtp.ServerInfo) (string, []byte, error) {
	if !server.TLS && !a.allowPlaintext {
		return "", nil, errAuthNeedsTLS
	}
	// The checks are done above: allowUnenc true keeps go-mail from applying
	// its own rule (host names "localhost", "127.0.0.1" and "::1" only).
	switch {
	case slices.Contains(server.Auth, "PLAIN"):
		a.mech = mailsmtp.PlainAuth("", a.username, a.password, server.Name, true)
	case slices.Contains(server.Auth, "LOGIN"):
		a.mech = mailsmtp.LoginAuth(a.username, a.password, server.Name, true)
	default:
		return "", nil, errNoAuthMechanism
	}
	return a.mech.Start(server)
}

// Next continues the mechanism chosen by Start.
func (a *auth) Next(fromServer []byte, more bool) ([]byte, error) {
	return a.mech.Next(fromServer, more)
}

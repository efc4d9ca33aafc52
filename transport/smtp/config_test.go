package smtp

import (
	"testing"
	"time"

	"github.com/wneessen/go-mail/smtp"
)

func TestResolveDefaults(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		addr string
		mode TLSMode
	}{
		{Options{}, "mail.example.com:587", StartTLS},
		{Options{TLS: ImplicitTLS}, "mail.example.com:465", ImplicitTLS},
		{Options{TLS: NoTLS}, "mail.example.com:587", NoTLS},
	} {
		c, err := resolve("mail.example.com", 0, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if c.addr != tc.addr || c.tlsMode != tc.mode {
			t.Errorf("%+v: addr %s mode %s, want %s %s", tc.opts, c.addr, c.tlsMode, tc.addr, tc.mode)
		}
		if c.timeout != DefaultTimeout || c.idleTimeout != DefaultIdleTimeout || c.pool != DefaultPool || c.helo == "" {
			t.Errorf("defaults not applied: %+v", c)
		}
		if (c.tls == nil) != (tc.mode == NoTLS) {
			t.Errorf("%s: tls config %v", tc.mode, c.tls)
		}
	}
	c, err := resolve("::1", 2525, Options{Timeout: time.Second, ServerName: "mx.test"})
	if err != nil {
		t.Fatal(err)
	}
	if c.addr != "[::1]:2525" || c.timeout != time.Second || c.tls.ServerName != "mx.test" {
		t.Errorf("got addr %s timeout %v server name %s", c.addr, c.timeout, c.tls.ServerName)
	}
}

// TestAuthRefusesPlaintext: credentials go out only over TLS, unless the
// transport was opened with tls=none to a loopback host.
func TestAuthRefusesPlaintext(t *testing.T) {
	plain := &smtp.ServerInfo{Name: "mail.example.com", TLS: false, Auth: []string{"PLAIN", "LOGIN"}}
	a := &auth{username: "u", password: "p"}
	if _, _, err := a.Start(plain); err != errAuthNeedsTLS {
		t.Errorf("Start without TLS: %v, want errAuthNeedsTLS", err)
	}
	a.allowPlaintext = true
	if mech, resp, err := a.Start(plain); err != nil || mech != "PLAIN" || string(resp) != "\x00u\x00p" {
		t.Errorf("Start with plaintext allowed: %q %q %v", mech, resp, err)
	}
	secure := &smtp.ServerInfo{Name: "mail.example.com", TLS: true, Auth: []string{"CRAM-MD5", "LOGIN"}}
	if mech, _, err := (&auth{username: "u", password: "p"}).Start(secure); err != nil || mech != "LOGIN" {
		t.Errorf("Start with LOGIN only: %q %v", mech, err)
	}
	none := &smtp.ServerInfo{Name: "mail.example.com", TLS: true, Auth: []string{"CRAM-MD5"}}
	if _, _, err := (&auth{username: "u", password: "p"}).Start(none); err != errNoAuthMechanism {
		t.Errorf("Start with no known mechanism: %v, want errNoAuthMechanism", err)
	}
}

package smtp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	mailsmtp "github.com/wneessen/go-mail/smtp"
)

func TestResolveDefaults(t *testing.T) {
	t.Parallel()
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
		require.NoError(t, err)
		assert.Equal(t, tc.addr, c.addr, "%+v: addr", tc.opts)
		assert.Equal(t, tc.mode, c.tlsMode, "%+v: mode", tc.opts)
		assert.Equal(t, DefaultTimeout, c.timeout, "default timeout")
		assert.Equal(t, DefaultIdleTimeout, c.idleTimeout, "default idle timeout")
		assert.Equal(t, DefaultPool, c.pool, "default pool")
		assert.NotEmpty(t, c.helo, "default helo")
		assert.Equal(t, tc.mode == NoTLS, c.tls == nil, "%s: tls config %v", tc.mode, c.tls)
	}
	c, err := resolve("::1", 2525, Options{Timeout: time.Second, ServerName: "mx.test"})
	require.NoError(t, err)
	assert.Equal(t, "[::1]:2525", c.addr)
	assert.Equal(t, time.Second, c.timeout)
	assert.Equal(t, "mx.test", c.tls.ServerName)
}

// TestAuthRefusesPlaintext: credentials go out only over TLS, unless the
// transport was opened with tls=none to a loopback host.
func TestAuthRefusesPlaintext(t *testing.T) {
	t.Parallel()
	plain := &mailsmtp.ServerInfo{Name: "mail.example.com", TLS: false, Auth: []string{"PLAIN", "LOGIN"}}
	a := &auth{username: "u", password: "p"}
	_, _, err := a.Start(plain)
	assert.Equal(t, errAuthNeedsTLS, err, "Start without TLS")
	a.allowPlaintext = true
	mech, resp, err := a.Start(plain)
	if assert.NoError(t, err, "Start with plaintext allowed") {
		assert.Equal(t, "PLAIN", mech, "Start with plaintext allowed")
		assert.Equal(t, "\x00u\x00p", string(resp), "Start with plaintext allowed")
	}
	secure := &mailsmtp.ServerInfo{Name: "mail.example.com", TLS: true, Auth: []string{"CRAM-MD5", "LOGIN"}}
	mech, _, err = (&auth{username: "u", password: "p"}).Start(secure)
	if assert.NoError(t, err, "Start with LOGIN only") {
		assert.Equal(t, "LOGIN", mech, "Start with LOGIN only")
	}
	none := &mailsmtp.ServerInfo{Name: "mail.example.com", TLS: true, Auth: []string{"CRAM-MD5"}}
	_, _, err = (&auth{username: "u", password: "p"}).Start(none)
	assert.Equal(t, errNoAuthMechanism, err, "Start with no known mechanism")
}

package bounce

import (
	"crypto/tls"
	"math/big"
	"testing"

	"github.com/emersion/go-smtp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/internal/certfile/certfiletest"
)

// TestSTARTTLS: with a certificate the listener offers STARTTLS, and a
// report delivered over it is recorded; without one it offers none.
func TestSTARTTLS(t *testing.T) {
	certPEM, keyPEM, roots := certfiletest.SelfSigned(t, "bounces.shop.example", 7)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	f := startTLS(t, 0, &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}})
	// DialStartTLS fails when the server does not offer STARTTLS.
	c, err := smtp.DialStartTLS(f.addr, &tls.Config{RootCAs: roots, ServerName: "bounces.shop.example"})
	require.NoError(t, err, "no STARTTLS with a certificate")
	defer c.Close()
	require.NoError(t, c.Hello("mx.example.org"))
	state, ok := c.TLSConnectionState()
	require.True(t, ok)
	assert.Equal(t, big.NewInt(7), state.PeerCertificates[0].SerialNumber)
	require.NoError(t, c.Mail("", nil))
	require.NoError(t, c.Rcpt(f.rp, nil))
	w, err := c.Data()
	require.NoError(t, err)
	_, err = w.Write([]byte(f.fixtureText(t, "gmail-5.1.1.eml")))
	require.NoError(t, err)
	require.NoError(t, w.Close(), "the report over TLS was not accepted")
	evs := f.events(t)
	require.Len(t, evs, 1)
	assert.Equal(t, "ann@example.com", evs[0].Recipient)

	plain := start(t, 0)
	c2, err := smtp.Dial(plain.addr)
	require.NoError(t, err)
	defer c2.Close()
	require.NoError(t, c2.Hello("mx.example.org"))
	ok, _ = c2.Extension("STARTTLS")
	assert.False(t, ok, "STARTTLS offered without a certificate")
}

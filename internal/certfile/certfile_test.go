package certfile_test

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/internal/certfile"
	"github.com/mailspool/mailspool/internal/certfile/certfiletest"
)

func pair(t *testing.T, serial int64) (certPEM, keyPEM []byte) {
	c, k, _ := certfiletest.SelfSigned(t, "bounces.example.com", serial)
	return c, k
}

// write replaces path's content the way a renewal does (a new file moved
// over the old one), and moves its time on so that the change shows on
// file systems with coarse timestamps.
func write(t *testing.T, path string, b []byte, at time.Time) {
	t.Helper()
	tmp := path + ".new"
	require.NoError(t, os.WriteFile(tmp, b, 0o600))
	require.NoError(t, os.Chtimes(tmp, at, at))
	require.NoError(t, os.Rename(tmp, path))
}

// served returns the serial of the certificate a handshake with srv gets.
func served(t *testing.T, cfg *tls.Config) int64 {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test reads the serial
	require.NoError(t, err)
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

func TestRenewalIsTakenUpWithoutARestart(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	c1, k1 := pair(t, 1)
	at := time.Now().Add(-time.Hour)
	write(t, certPath, c1, at)
	write(t, keyPath, k1, at)

	r, err := certfile.Load(certPath, keyPath, nil)
	require.NoError(t, err)
	cfg := r.ServerConfig()
	assert.Equal(t, int64(1), served(t, cfg))

	// Half a renewal: the new certificate, the old key. The old pair is
	// still served, and the failure is reported.
	c2, k2 := pair(t, 2)
	write(t, certPath, c2, at.Add(time.Minute))
	assert.Equal(t, int64(1), served(t, cfg), "a certificate without its key was served")
	require.Error(t, r.Err())
	assert.NotContains(t, r.Err().Error(), "PRIVATE KEY")

	// The key follows: the new pair from the next handshake on.
	write(t, keyPath, k2, at.Add(2*time.Minute))
	assert.Equal(t, int64(2), served(t, cfg))
	assert.NoError(t, r.Err())

	// A file missing for a moment (deleted before its replacement is
	// moved in): the current pair is still served.
	require.NoError(t, os.Remove(keyPath))
	assert.Equal(t, int64(2), served(t, cfg))
	require.Error(t, r.Err())
}

func TestLoadErrorsNameTheProblem(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	_, err := certfile.Load(certPath, keyPath, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cert.pem")

	c1, k1 := pair(t, 1)
	_, k2 := pair(t, 2)
	require.NoError(t, os.WriteFile(certPath, c1, 0o600))
	require.NoError(t, os.WriteFile(keyPath, k2, 0o600))
	_, err = certfile.Load(certPath, keyPath, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "private key does not match public key")
	assert.NotContains(t, err.Error(), string(k2[30:60]), "key material in the error")

	require.NoError(t, os.WriteFile(keyPath, k1, 0o600))
	_, err = certfile.Load(certPath, keyPath, nil)
	require.NoError(t, err)
}

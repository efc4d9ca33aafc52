package cli

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/emersion/go-smtp"
	"github.com/mailspool/mailspool/internal/certfile/certfiletest"
	"github.com/mailspool/mailspool/suppress"
	"github.com/mailspool/mailspool/verp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServeSMTPBounce is the black-box path of a bounce: "mailspool serve
// --smtp" takes a Postfix DSN sent to a mail's VERP return path over
// STARTTLS with the configured certificate, refuses a forged one, and the
// recipient is suppressed.
func TestServeSMTPBounce(t *testing.T) {
	key := bytes.Repeat([]byte{5}, 32)
	t.Setenv("TEST_VERP_KEY", hex.EncodeToString(key))
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "q.db")
	certPEM, keyPEM, roots := certfiletest.SelfSigned(t, "bounces.shop.example", 1)
	certPath, keyPath := filepath.Join(dir, "b.crt"), filepath.Join(dir, "b.key")
	require.NoError(t, os.WriteFile(certPath, certPEM, 0o600))
	require.NoError(t, os.WriteFile(keyPath, keyPEM, 0o600))
	config := `
[lanes.news]
transport = "fake://"
verp = true

[bounces]
domain = "bounces.shop.example"
key_env = "TEST_VERP_KEY"
tls_cert = "@CERT@"
tls_key = "@KEY@"
`
	cfg := writeFile(t, "mailspool.toml", strings.NewReplacer("@CERT@", certPath, "@KEY@", keyPath).Replace(config))
	code, _, stderr := mailspoolProcess(t, "migrate", "--db", db, "--config", cfg)
	require.Zero(t, code, stderr)

	// A certificate file that is not there stops serve at once, naming it.
	bad := writeFile(t, "bad.toml", strings.NewReplacer("@CERT@", filepath.Join(dir, "missing.crt"), "@KEY@", keyPath).Replace(config))
	code, _, stderr = mailspoolProcess(t, "serve", "--db", db, "--config", bad, "--smtp", "127.0.0.1:0")
	assert.NotZero(t, code)
	assert.Contains(t, stderr, "bounces.tls_cert")
	assert.Contains(t, stderr, "missing.crt")
	code, _, stderr = mailspoolProcess(t, "enqueue", "--db", db, "--config", cfg, "--from", "news@shop.example", "--to", "ann@example.com", "--subject", "news", "--text", "hi")
	require.Zero(t, code, stderr)

	serve := exec.Command(os.Args[0], "serve", "--db", db, "--config", cfg, "--smtp", "127.0.0.1:0")
	serve.Env = append(os.Environ(), "MAILSPOOL_TEST_MAIN=1")
	pipe, err := serve.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, serve.Start())
	t.Cleanup(func() { _ = serve.Process.Kill(); _ = serve.Wait() })
	lines := bufio.NewScanner(pipe)
	addr := ""
	for addr == "" && lines.Scan() {
		if _, a, ok := strings.Cut(lines.Text(), "bounce listener on "); ok {
			addr, _, _ = strings.Cut(a, " ")
		}
	}
	require.NotEmpty(t, addr, "serve said where it listens")
	go func() {
		for lines.Scan() {
		}
	}()

	signer, err := verp.New(key, "bounces.shop.example")
	require.NoError(t, err)
	rp, err := signer.Address("news", 1)
	require.NoError(t, err)
	dsn, err := os.ReadFile(filepath.Join("..", "bounce", "testdata", "postfix-5.1.1.eml"))
	require.NoError(t, err)
	send := func(rcpt string) error {
		c, err := smtp.DialStartTLS(addr, &tls.Config{RootCAs: roots, ServerName: "bounces.shop.example"})
		require.NoError(t, err, "STARTTLS with the configured certificate")
		defer c.Close()
		require.NoError(t, c.Hello("mx.example.org"))
		require.NoError(t, c.Mail("", nil))
		if err := c.Rcpt(rcpt, nil); err != nil {
			return err
		}
		w, err := c.Data()
		require.NoError(t, err)
		_, _ = w.Write(bytes.ReplaceAll(dsn, []byte("BOUNCE_ADDRESS"), []byte(rp)))
		return w.Close()
	}
	var se *smtp.SMTPError
	require.ErrorAs(t, send(strings.Replace(rp, "+news.1.", "+news.2.", 1)), &se)
	assert.Equal(t, 550, se.Code, "a return path whose mac does not match is refused")
	require.NoError(t, send(rp))

	code, out, stderr := mailspoolProcess(t, "suppress", "list", "--db", db, "--config", cfg, "--json")
	require.Zero(t, code, stderr)
	var es []suppress.Entry
	require.NoError(t, json.Unmarshal([]byte(out), &es), out)
	require.Len(t, es, 1, out)
	assert.Equal(t, "ann@example.com", es[0].Address)
	assert.Equal(t, suppress.HardBounce, es[0].Reason)
	assert.True(t, strings.HasPrefix(es[0].Source, "dsn:news/1/"), es[0].Source)

	require.NoError(t, serve.Process.Signal(syscall.SIGTERM))
	assert.NoError(t, serve.Wait(), "serve exits 0 on SIGTERM")
}

package cli

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mailspool/mailspool/suppress"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mailspoolProcess runs the command as a real process and returns its exit
// code and output.
func mailspoolProcess(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "MAILSPOOL_TEST_MAIN=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String(), errOut.String()
	}
	require.NoError(t, err)
	return 0, out.String(), errOut.String()
}

// TestServeSendGridBounceSuppresses is the black-box path: "mailspool
// serve" receives a signed SendGrid bounce, "suppress list --json" shows
// the address, and "enqueue" to it exits with its own code naming the
// reason.
func TestServeSendGridBounceSuppresses(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	require.NoError(t, err)
	t.Setenv("TEST_SENDGRID_WEBHOOK_KEY", base64.StdEncoding.EncodeToString(der))

	db := "sqlite:" + filepath.Join(t.TempDir(), "q.db")
	cfg := writeFile(t, "mailspool.toml", `
[lanes.tx]
transport = "fake://"

[serve]
listen = "127.0.0.1:0"

[serve.sendgrid]
verification_key_env = "TEST_SENDGRID_WEBHOOK_KEY"
`)
	code, _, stderr := mailspoolProcess(t, "migrate", "--db", db, "--config", cfg)
	require.Zero(t, code, stderr)

	serve := exec.Command(os.Args[0], "serve", "--db", db, "--config", cfg)
	serve.Env = append(os.Environ(), "MAILSPOOL_TEST_MAIN=1")
	pipe, err := serve.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, serve.Start())
	t.Cleanup(func() { _ = serve.Process.Kill(); _ = serve.Wait() })
	lines := bufio.NewScanner(pipe)
	addr := ""
	for addr == "" && lines.Scan() {
		if _, a, ok := strings.Cut(lines.Text(), "listening on "); ok {
			addr = a
		}
	}
	require.NotEmpty(t, addr, "serve said where it listens")
	go func() { // keep reading so that serve never blocks on its log
		for lines.Scan() {
		}
	}()

	body := []byte(`[{"email":"Gone@Example.com","timestamp":` + strconv.FormatInt(time.Now().Unix(), 10) +
		`,"event":"bounce","type":"bounce","sg_event_id":"ev-black-box","sg_message_id":"xid.filter1","reason":"550 5.1.1 no such user","status":"5.1.1"}]`)
	stamp := strconv.FormatInt(time.Now().Unix(), 10)
	sum := sha256.Sum256(append([]byte(stamp), body...))
	sig, err := ecdsa.SignASN1(rand.Reader, key, sum[:])
	require.NoError(t, err)
	post := func(b []byte) int {
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/webhooks/sendgrid", bytes.NewReader(b))
		require.NoError(t, err)
		req.Header.Set("X-Twilio-Email-Event-Webhook-Signature", base64.StdEncoding.EncodeToString(sig))
		req.Header.Set("X-Twilio-Email-Event-Webhook-Timestamp", stamp)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	tampered := bytes.Replace(body, []byte("Gone@"), []byte("Gona@"), 1)
	assert.Equal(t, http.StatusForbidden, post(tampered), "a body altered by one byte is refused")
	require.Equal(t, http.StatusOK, post(body))

	code, out, stderr := mailspoolProcess(t, "suppress", "list", "--db", db, "--config", cfg, "--json")
	require.Zero(t, code, stderr)
	var es []suppress.Entry
	require.NoError(t, json.Unmarshal([]byte(out), &es), out)
	require.Len(t, es, 1, out)
	assert.Equal(t, "gone@example.com", es[0].Address)
	assert.Equal(t, suppress.HardBounce, es[0].Reason)
	assert.Equal(t, "sendgrid:ev-black-box", es[0].Source)

	code, _, stderr = mailspoolProcess(t, "enqueue", "--db", db, "--config", cfg,
		"--from", "shop@example.com", "--to", "gone@example.com", "--subject", "s", "--text", "t")
	assert.Equal(t, exitSuppressed, code, stderr)
	assert.Contains(t, stderr, "gone@example.com is suppressed: hard_bounce since")

	require.NoError(t, serve.Process.Signal(syscall.SIGTERM))
	assert.NoError(t, serve.Wait(), "serve exits 0 on SIGTERM")
}

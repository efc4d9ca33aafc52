package cli

import (
	"bufio"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startServe runs "mailspool serve" as a process and returns the address
// it listens on.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	serve := exec.Command(os.Args[0], append([]string{"serve"}, args...)...)
	serve.Env = append(os.Environ(), "MAILSPOOL_TEST_MAIN=1")
	pipe, err := serve.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, serve.Start())
	t.Cleanup(func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		_ = serve.Wait()
	})
	lines := bufio.NewScanner(pipe)
	addr := ""
	for addr == "" && lines.Scan() {
		if _, a, ok := strings.Cut(lines.Text(), "listening on "); ok {
			addr = a
		}
	}
	require.NotEmpty(t, addr, "serve said where it listens")
	go func() {
		for lines.Scan() {
		}
	}()
	return addr
}

var unsubscribeLink = regexp.MustCompile(`<https://mail\.example\.com(/u/[A-Za-z0-9_.~-]+)>`)

// TestServeOneClickUnsubscribe is the black-box path: a bulk lane's mail
// carries the link, a GET of it changes nothing, the one-click POST to
// "mailspool serve" unsubscribes from that list only, and the next
// enqueue to the list exits with the suppressed code while the
// transactional lane still takes mail.
func TestServeOneClickUnsubscribe(t *testing.T) {
	t.Setenv("TEST_UNSUBSCRIBE_KEY", strings.Repeat("ab", 32))
	db := "sqlite:" + filepath.Join(t.TempDir(), "q.db")
	cfg := writeFile(t, "mailspool.toml", `
[lanes.news]
transport = "fake://"
table = "news_queue"
bulk = true

[lanes.tx]
transport = "fake://"

[serve]
listen = "127.0.0.1:0"

[unsubscribe]
url = "https://mail.example.com/u/"

[[unsubscribe.keys]]
id = "k1"
secret_env = "TEST_UNSUBSCRIBE_KEY"
`)
	code, _, stderr := mailspoolProcess(t, "migrate", "--db", db, "--config", cfg)
	require.Zero(t, code, stderr)
	enqueue := func(lane string, extra ...string) (int, string) {
		args := append([]string{"enqueue", "--db", db, "--config", cfg, "--lane", lane, "--from", "news@shop.example", "--to", "ann@example.com", "--subject", "s", "--text", "t"}, extra...)
		code, _, stderr := mailspoolProcess(t, args...)
		return code, stderr
	}
	code, stderr = enqueue("news", "--list", "weekly")
	require.Zero(t, code, stderr)
	code, out, stderr := mailspoolProcess(t, "show", "--db", db, "--config", cfg, "--lane", "news", "--full", "1")
	require.Zero(t, code, stderr)
	m := unsubscribeLink.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	assert.Contains(t, out, "List-Unsubscribe=One-Click")
	code, stderr = enqueue("tx", "--list", "weekly")
	assert.NotZero(t, code)
	assert.Contains(t, stderr, "lane tx has no lists", "a transactional lane has no lists")

	addr := startServe(t, "--db", db, "--config", cfg)
	link := "http://" + addr + m[1]
	resp, err := http.Get(link)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	code, out, _ = mailspoolProcess(t, "suppress", "list", "--db", db, "--config", cfg, "--json")
	require.Zero(t, code)
	assert.Equal(t, "[]", strings.TrimSpace(out), "a GET changes nothing")

	resp, err = http.PostForm(link, url.Values{"List-Unsubscribe": {"One-Click"}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	code, stderr = enqueue("news", "--list", "weekly")
	assert.Equal(t, exitSuppressed, code, stderr)
	assert.Contains(t, stderr, "ann@example.com is suppressed: unsubscribe since")
	code, stderr = enqueue("news", "--list", "offers")
	assert.Zero(t, code, stderr)
	code, stderr = enqueue("tx")
	assert.Zero(t, code, stderr)
}

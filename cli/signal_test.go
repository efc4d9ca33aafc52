package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain lets a test run this binary as the real mailspool command:
// with MAILSPOOL_TEST_MAIN=1 the process is Main with the given
// arguments, and the scripts of testdata/script run it as "mailspool".
func TestMain(m *testing.M) {
	if os.Getenv("MAILSPOOL_TEST_MAIN") == "1" {
		mailspoolMain()
	}
	testscript.Main(m, map[string]func(){"mailspool": mailspoolMain})
}

// mailspoolMain is what cmd/mailspool's main does.
func mailspoolMain() { os.Exit(Main(context.Background(), os.Args[1:], Options{})) }

func laneStatsOf(t *testing.T, db, cfg string) laneStats {
	t.Helper()
	code, out, stderr := mailspool(t, "stats", "--db", db, "--config", cfg, "--json")
	require.Equal(t, 0, code, stderr)
	var s []laneStats
	require.NoError(t, json.Unmarshal([]byte(out), &s))
	require.Len(t, s, 1)
	return s[0]
}

// TestWorkerSIGTERM runs "mailspool worker" as a real process, sends it
// SIGTERM while sends are in flight, and checks that it exits 0 and leaves
// no row in sending: in-flight sends finish, the rest are given back.
func TestWorkerSIGTERM(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "q.db")
	cfg := writeFile(t, "mailspool.toml", `
[lanes.tx]
transport = "fake://?latency=400ms"
recipient_limit = "off"
batch = 20
concurrency = 4
`)
	code, _, stderr := mailspool(t, "migrate", "--db", db, "--config", cfg)
	require.Equal(t, 0, code, stderr)
	for i := range 40 {
		code, _, stderr = mailspool(t, "enqueue", "--db", db, "--config", cfg,
			"--from", "noreply@shop.example", "--to", "u"+strconv.Itoa(i)+"@example.com", "--subject", "s", "--text", "t")
		require.Equal(t, 0, code, stderr)
	}

	cmd := exec.Command(os.Args[0], "worker", "--db", db, "--config", cfg)
	cmd.Env = append(os.Environ(), "MAILSPOOL_TEST_MAIN=1")
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { return laneStatsOf(t, db, cfg).Sending > 0 }, 20*time.Second, 20*time.Millisecond)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		require.NoError(t, err, "exit status 0 after SIGTERM")
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the worker did not exit after SIGTERM")
	}
	s := laneStatsOf(t, db, cfg)
	assert.Zero(t, s.Sending, "rows left in sending")
	assert.Positive(t, s.SentLastHour, "the sends in flight finished")
	assert.Equal(t, int64(40), s.SentLastHour+s.Pending, "every mail is sent or pending again: %+v", s)
}

// TestWorkerStoppedWhileStartingExitsCleanly: SIGTERM while the worker
// is still starting (here: before it began, its context already done) is
// a clean stop, exit 0, and no advice to run migrate: it had claimed
// nothing. Before, the schema check that the signal interrupted said the
// suppression list's table was missing, and the worker exited 1, which a
// supervisor counts as a crash.
func TestWorkerStoppedWhileStartingExitsCleanly(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "q.db")
	cfg := writeFile(t, "mailspool.toml", "[lanes.tx]\ntransport = \"fake://\"\n")
	code, _, stderr := mailspool(t, "migrate", "--db", db, "--config", cfg)
	require.Equal(t, 0, code, stderr)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the signal came
	var out, errOut bytes.Buffer
	code = run(ctx, &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut}, []string{"worker", "--db", db, "--config", cfg})
	assert.Equal(t, 0, code, errOut.String())
	assert.NotContains(t, errOut.String(), "migrate")
}

// TestWorkersOfOneConfigEachWithTheirOwnListener: the per-lane systemd
// layout runs one process per lane from one config; its admin_listen is
// taken (here by a listener of the test, as by the first lane's
// process), so another process binds its own address or none, from
// --admin-listen or MAILSPOOL_ADMIN_LISTEN, instead of failing.
func TestWorkersOfOneConfigEachWithTheirOwnListener(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	db := "sqlite:" + filepath.Join(t.TempDir(), "q.db")
	cfg := writeFile(t, "mailspool.toml", `
admin_listen = "`+taken.Addr().String()+`"
[lanes.tx]
transport = "fake://"
poll_interval = "10ms"
`)
	code, _, stderr := mailspool(t, "migrate", "--db", db, "--config", cfg)
	require.Equal(t, 0, code, stderr)
	worker := func(args ...string) (int, string) {
		t.Helper()
		code, _, stderr := mailspool(t, "enqueue", "--db", db, "--config", cfg, "--from", "a@example.com", "--to", "b@example.com", "--subject", "s", "--text", "t")
		require.Equal(t, 0, code, stderr)
		code, _, stderr = mailspool(t, append([]string{"worker", "--db", db, "--config", cfg, "--max-messages", "1"}, args...)...)
		return code, stderr
	}
	code, stderr = worker()
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "address already in use", "the config's address is taken")
	code, stderr = worker("--admin-listen", "off")
	require.Equal(t, 0, code, stderr)
	code, stderr = worker("--admin-listen", "127.0.0.1:0")
	require.Equal(t, 0, code, stderr)
	t.Setenv("MAILSPOOL_ADMIN_LISTEN", "off")
	code, stderr = worker()
	require.Equal(t, 0, code, stderr)
	t.Setenv("MAILSPOOL_ADMIN_LISTEN", "9465")
	code, _, stderr = mailspool(t, "worker", "--db", db, "--config", cfg, "--max-messages", "1")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `MAILSPOOL_ADMIN_LISTEN: "9465" is not host:port`)
	code, _, stderr = mailspool(t, "worker", "--db", db, "--config", cfg, "--admin-listen", "nowhere")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `--admin-listen: "nowhere" is not host:port (e.g. 127.0.0.1:9465) or off`)
}

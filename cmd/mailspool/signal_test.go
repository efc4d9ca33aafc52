package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain lets a test run this binary as the real mailspool command:
// with MAILSPOOL_TEST_MAIN=1 the process is main() with the given arguments.
func TestMain(m *testing.M) {
	if os.Getenv("MAILSPOOL_TEST_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

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

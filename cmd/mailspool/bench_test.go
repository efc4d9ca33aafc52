package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBenchPrintsOneLineAndJSON(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "bench.db")
	code, out, stderr := mailspool(t, "bench", "--db", db, "--messages", "100", "--workers", "2", "--poll", "20ms")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "mailspool: enqueued 100 mails", "progress goes to stderr")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 1)
	for _, field := range []string{"store=sqlite", "workers=2", "producers=4", "messages=100", "latency=0s", "history=0",
		"enqueue_per_s=", "drain_per_s=", "duplicates=0", "lost=0", "deadlocks=0", "p50_claim_ms=", "p99_claim_ms=", "p99_enqueue_ms=", "rss_mb="} {
		require.Contains(t, lines[0], " "+field)
	}

	code, out, stderr = mailspool(t, "bench", "--db", db, "--messages", "50", "--poll", "20ms", "--json", "--quiet")
	require.Equal(t, 0, code, stderr)
	require.Empty(t, stderr)
	var r struct {
		Messages   int `json:"messages"`
		Duplicates int `json:"duplicates"`
		Lost       int `json:"lost"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	require.Equal(t, 50, r.Messages)
}

func TestBenchRefusesBadFlags(t *testing.T) {
	code, _, stderr := mailspool(t, "bench", "--algorithm", "fifo", "--db", "sqlite:"+filepath.Join(t.TempDir(), "b.db"))
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `algorithm "fifo"`)
	code, stdout, _ := mailspool(t, "help")
	require.Equal(t, 0, code)
	require.NotContains(t, stdout, "bench-worker", "the worker process command is hidden")
}

package cli

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mailspool/mailspool/queue/dburl"

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

func TestBenchRepeatsAndSummarizes(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "bench.db")
	code, out, stderr := mailspool(t, "bench", "--db", db, "--messages", "40", "--workers", "2", "--poll", "20ms", "--algorithm", "both", "--repeat", "2")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "bench: run 2 of 2")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 6, out)
	for i, want := range []string{"algorithm=classic", "algorithm=mailspool", "algorithm=classic", "algorithm=mailspool"} {
		require.Contains(t, lines[i], " "+want+" ")
		require.True(t, strings.HasSuffix(lines[i], fmt.Sprintf(" run=%d", i/2+1)), lines[i])
	}
	require.True(t, strings.HasPrefix(lines[4], "bench-summary algorithm=classic runs=2 "), lines[4])
	require.True(t, strings.HasPrefix(lines[5], "bench-summary algorithm=mailspool runs=2 "), lines[5])
	require.Contains(t, lines[5], " vs_classic_median=")
	require.Contains(t, lines[5], " lost=0")

	code, out, stderr = mailspool(t, "bench", "--db", db, "--messages", "30", "--poll", "20ms", "--repeat", "2", "--json", "--quiet")
	require.Equal(t, 0, code, stderr)
	lines = strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	var s struct {
		Kind      string `json:"kind"`
		Runs      int    `json:"runs"`
		DrainPerS struct {
			Median, Min, Max float64
		} `json:"drain_per_s"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[2]), &s))
	require.Equal(t, "summary", s.Kind)
	require.Equal(t, 2, s.Runs)
	require.True(t, s.DrainPerS.Min > 0 && s.DrainPerS.Min <= s.DrainPerS.Median && s.DrainPerS.Median <= s.DrainPerS.Max, "%+v", s.DrainPerS)
}

// TestBenchProfilesTheDrain: --drain-cpuprofile writes a profile that
// pprof can read, of the drain alone: the workers' code is in it and the
// producers' Enqueue is not.
func TestBenchProfilesTheDrain(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "drain.prof")
	code, _, stderr := mailspool(t, "bench", "--db", "sqlite:"+filepath.Join(dir, "bench.db"), "--messages", "5000", "--workers", "2",
		"--poll", "20ms", "--quiet", "--drain-cpuprofile", prof)
	require.Equal(t, 0, code, stderr)
	// A profile is a gzipped protocol buffer whose string table names
	// every function its samples passed through.
	f, err := os.Open(prof)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	raw, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Contains(t, string(raw), "mailspool/queue.(*Worker)", "the profile holds no sample of a worker")
	require.NotContains(t, string(raw), "queue.(*Queue).Enqueue", "the profile holds the producers' enqueues")

	code, _, stderr = mailspool(t, "bench", "--db", "sqlite:"+filepath.Join(dir, "bench.db"), "--cpuprofile", prof, "--drain-cpuprofile", prof)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "one CPU profile at a time")
	code, _, stderr = mailspool(t, "bench", "--db", "sqlite:"+filepath.Join(dir, "bench.db"), "--steady", "--drain-cpuprofile", prof)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "beside its producers")
	code, _, stderr = mailspool(t, "bench", "--db", "sqlite:"+filepath.Join(dir, "bench.db"), "--drain-cpuprofile", filepath.Join(dir, "no", "such", "dir"))
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "--drain-cpuprofile")
	require.NotContains(t, stderr, "enqueued", "a profile that cannot be written fails before the run")
}

func TestBenchRefusesBadFlags(t *testing.T) {
	code, _, stderr := mailspool(t, "bench", "--repeat", "0", "--db", "sqlite:"+filepath.Join(t.TempDir(), "b.db"))
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--repeat 0")
	code, _, stderr = mailspool(t, "bench", "--algorithm", "fifo", "--db", "sqlite:"+filepath.Join(t.TempDir(), "b.db"))
	require.Equal(t, 2, code, "a usage error")
	require.Contains(t, stderr, `--algorithm "fifo": want mailspool, classic or both`)
	code, _, stderr = mailspool(t, "bench", "--priorities", "urgent", "--db", "sqlite:"+filepath.Join(t.TempDir(), "b.db"))
	require.Equal(t, 2, code, "a usage error")
	require.Contains(t, stderr, `--priorities "urgent": want mix or interleave`)
	code, stdout, _ := mailspool(t, "help")
	require.Equal(t, 0, code)
	require.NotContains(t, stdout, "bench-worker", "the worker process command is hidden")
}

// TestBenchNeverReplacesALaneOrAnApplicationTable: a lane table with
// pending mail, an application's table, a lane of the config not yet
// migrated and mailspool's own tables are each refused as --table, and
// are intact afterwards.
func TestBenchNeverReplacesALaneOrAnApplicationTable(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db string) {
		cfg := writeFile(t, "mailspool.toml", `
[lanes.tx]
table = "mail_queue"
transport = "fake://"
[lanes.news]
table = "newsletter"
transport = "fake://"
`)
		code, _, stderr := mailspool(t, "migrate", "--db", db, "--config", cfg, "--lane", "tx")
		require.Equal(t, 0, code, stderr)
		code, _, stderr = mailspool(t, "enqueue", "--db", db, "--config", cfg, "--lane", "tx",
			"--from", "shop@example.com", "--to", "ann@example.com", "--subject", "pending", "--text", "x")
		require.Equal(t, 0, code, stderr)
		sqlDB, err := dburl.Open(db)
		require.NoError(t, err)
		defer sqlDB.Close()
		for _, stmt := range []string{
			`CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL)`,
			`INSERT INTO customers VALUES (1, 'Ann')`,
		} {
			_, err := sqlDB.Exec(stmt)
			require.NoError(t, err, stmt)
		}

		for _, c := range []struct{ table, want string }{
			{"mail_queue", "a lane of the config (lane table mail_queue)"},
			{"customers", "table customers exists and was not created by mailspool bench"},
			{"newsletter", "a lane of the config (lane table newsletter)"},
			{"mailspool_schema", "mailspool's own tables"},
			{"mailspool_lanes", "mailspool's own tables"},
		} {
			code, _, stderr := mailspool(t, "bench", "--db", db, "--config", cfg, "--table", c.table, "--messages", "10", "--quiet")
			require.Equal(t, 1, code, c.table)
			require.Contains(t, stderr, c.want, c.table)
		}
		code, _, stderr = mailspool(t, "bench", "--db", db, "--table", "mail_queue", "--messages", "10", "--quiet")
		require.Equal(t, 1, code, "without --config too")
		require.Contains(t, stderr, "mail_queue")

		code, out, stderr := mailspool(t, "list", "--db", db, "--config", cfg, "--lane", "tx", "--json")
		require.Equal(t, 0, code, stderr)
		require.Equal(t, []int64{1}, listIDs(t, out), "the lane's pending mail is there")
		var n int
		require.NoError(t, sqlDB.QueryRow(`SELECT COUNT(*) FROM customers WHERE name = 'Ann'`).Scan(&n))
		require.Equal(t, 1, n)
		code, _, stderr = mailspool(t, "stats", "--db", db, "--config", cfg, "--lane", "tx")
		require.Equal(t, 0, code, "the store still works: %s", stderr)
	})
}

// TestBenchLeavesNothingBehind: without --db the run's SQLite file is
// temporary and removed at the end.
func TestBenchLeavesNothingBehind(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv("MAILSPOOL_DATABASE", "sqlite:"+filepath.Join(tmp, "production.db"))
	code, out, stderr := mailspool(t, "bench", "--messages", "20", "--workers", "1", "--poll", "20ms", "--quiet")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, " table=mailspool_bench_")
	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, entries, "no file is left, and $MAILSPOOL_DATABASE is not used")
}

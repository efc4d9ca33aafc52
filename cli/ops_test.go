package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl/dburltest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// forEachDatabase runs f on a fresh SQLite file, a fresh MariaDB database
// (MAILSPOOL_TEST_MYSQL or the local server) and a fresh PostgreSQL
// database (MAILSPOOL_TEST_POSTGRES or the local server). Under CI=true an
// unreachable server fails the test; elsewhere its part is skipped.
func forEachDatabase(t *testing.T, f func(t *testing.T, dbURL string)) {
	t.Helper()
	dburltest.Each(t, func(t *testing.T, _, u string) { f(t, u) })
}

// mailspoolIn runs a command line with stdin.
func mailspoolIn(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), &env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut}, args)
	return code, out.String(), errOut.String()
}

func listIDs(t *testing.T, out string) []int64 {
	t.Helper()
	var rows []listedRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows), out)
	ids := []int64{}
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	return ids
}

// TestOperatorVerbs seeds four mails through enqueue and the worker (with
// the fake transport: +550 fails for good, +421 is retried) and drives
// every operator verb on them, with known answers.
func TestOperatorVerbs(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db string) {
		cfg := writeFile(t, "mailspool.toml", `
[lanes.tx]
transport = "fake://?recipient=true"
recipient_limit = "off"
poll_interval = "10ms"
`)
		ms := func(args ...string) (int, string, string) {
			t.Helper()
			return mailspool(t, append(args, "--db", db, "--config", cfg)...)
		}
		code, _, stderr := ms("migrate")
		require.Equal(t, 0, code, stderr)
		for _, m := range []struct{ to, template string }{
			{"ann@example.com", "welcome"}, {"bob+550@example.com", "reset"}, {"carl+421@example.com", "welcome"}, {"dora@example.com", "welcome"},
		} {
			code, _, stderr := ms("enqueue", "--from", "Shop <noreply@shop.example>", "--to", "Jürgen Groß <"+m.to+">", "--subject", "Grüße",
				"--text", "hi", "--html", "<p>hi</p>", "--template", m.template, "--header", "List-Unsubscribe: <https://shop.example/u>")
			require.Equal(t, 0, code, stderr)
		}
		code, _, stderr = ms("worker", "--max-messages", "4", "--log-level", "warn")
		require.Equal(t, 0, code, stderr)

		// list
		code, out, stderr := ms("list", "--json")
		require.Equal(t, 0, code, stderr)
		assert.Equal(t, []int64{4, 3, 2, 1}, listIDs(t, out), "newest first")
		_, out, _ = ms("list", "--json", "--to", "ANN@example.com")
		assert.Equal(t, []int64{1}, listIDs(t, out))
		_, out, _ = ms("list", "--json", "--status", "failed")
		assert.Equal(t, []int64{2}, listIDs(t, out))
		_, out, _ = ms("list", "--json", "--template", "welcome", "--kind", "sent")
		assert.Equal(t, []int64{4, 1}, listIDs(t, out))
		_, out, _ = ms("list", "--json", "--since", "1h")
		assert.Equal(t, []int64{4, 3, 2, 1}, listIDs(t, out))
		code, out, _ = ms("list", "--limit", "2")
		assert.Equal(t, 0, code)
		assert.Contains(t, out, "more: add --before 3")
		assert.Regexp(t, `tx\s+3\s+retry\s+1/5\s+\S+ \S+\s+carl\+421@example.com\s+welcome\s+temporary 421\n`, out)
		_, out, _ = ms("list", "--json", "--limit", "2", "--before", "3")
		assert.Equal(t, []int64{2, 1}, listIDs(t, out))
		code, _, stderr = ms("list", "--status", "lost")
		assert.Equal(t, exitUsage, code)
		assert.Contains(t, stderr, `unknown status "lost"`)

		// show --full
		code, out, stderr = ms("show", "2", "--full", "--json")
		require.Equal(t, 0, code, stderr)
		var shown map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &shown))
		assert.Equal(t, "failed", shown["status"])
		assert.Equal(t, "permanent", shown["last_kind"])
		assert.EqualValues(t, 550, shown["last_code"])
		for _, absent := range []string{"due_at", "lease_ends", "sent_at", "not_after", "provider_id"} {
			assert.NotContains(t, shown, absent, "nothing that has not happened")
		}
		assert.Contains(t, shown, "finished_at")
		msg := shown["message"].(map[string]any)
		assert.Equal(t, "Jürgen Groß <bob+550@example.com>", msg["to"])
		assert.Equal(t, "<p>hi</p>", msg["html"])
		assert.Equal(t, []any{map[string]any{"name": "List-Unsubscribe", "value": "<https://shop.example/u>"}}, msg["headers"])
		code, out, _ = ms("show", "--id", "2", "--full")
		assert.Equal(t, 0, code)
		assert.Contains(t, out, "List-Unsubscribe: <https://shop.example/u>")
		assert.Contains(t, out, "HTML body\n<p>hi</p>")
		assert.NotContains(t, out, "0001-01-01")

		// retry --dry-run says what it would do, and does nothing.
		code, out, stderr = ms("retry", "2", "--dry-run")
		require.Equal(t, 0, code, stderr)
		assert.Equal(t, "would retry 1 of 1 mails in lane tx\n", out)
		code, out, _ = ms("retry", "--dry-run", "99", "--json")
		assert.Equal(t, exitNotFound, code)
		assert.JSONEq(t, `{"lane": "tx", "matched": 1, "done": 0, "dry_run": true}`, out)
		code, out, _ = ms("retry", "--dry-run", "--failed")
		assert.Equal(t, 0, code)
		assert.Equal(t, "would retry 1 of 1 mails in lane tx\n", out)
		_, out, _ = ms("list", "--json", "--status", "failed")
		assert.Equal(t, []int64{2}, listIDs(t, out), "still failed")
		// retry of a mail that does not exist previews none.
		code, _, stderr = ms("retry", "99")
		assert.Equal(t, exitNotFound, code)
		assert.Contains(t, stderr, "0 of 1 mails in lane tx can be retried")
		assert.NotContains(t, stderr, "[y/N]", "nothing to ask about")

		// retry asks first, and counts first.
		code, out, stderr = ms("retry", "2")
		assert.Equal(t, exitFailure, code)
		assert.Contains(t, stderr, "1 of 1 mails in lane tx can be retried: ids 2")
		assert.Contains(t, stderr, "nothing retried")
		assert.Empty(t, out)
		code, out, stderr = mailspoolIn(t, "y\n", "retry", "--db", db, "--config", cfg, "2")
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, out, "retried 1 of 1 mails in lane tx")
		code, out, _ = ms("show", "2")
		assert.Equal(t, 0, code)
		assert.Contains(t, out, "status       pending, 0 of 5 attempts")
		assert.Regexp(t, `history\s+\S+ retry: was failed, 1 of 5 attempts, last permanent 550`, out)
		code, _, stderr = ms("retry", "--yes", "4", "99")
		assert.Equal(t, exitNotFound, code, stderr)
		assert.Contains(t, stderr, "mail 4 is sent, not retry or failed")
		assert.Contains(t, stderr, "no such mail: id 99")
		code, _, stderr = ms("retry", "--yes", "4")
		assert.Equal(t, exitFailure, code, "wrong state, none missing: %s", stderr)
		code, _, _ = ms("retry", "--yes")
		assert.Equal(t, exitUsage, code)
		code, _, _ = ms("retry", "--yes", "--to", "x@example.com", "4")
		assert.Equal(t, exitUsage, code)

		// cancel of more than one mail asks; --dry-run changes nothing.
		code, _, stderr = ms("cancel", "2", "3")
		assert.Equal(t, exitFailure, code)
		assert.Contains(t, stderr, "2 of 2 mails in lane tx can be cancelled")
		assert.Contains(t, stderr, "nothing cancelled (answer y, or pass --yes)")
		code, out, stderr = ms("cancel", "2", "3", "--dry-run")
		require.Equal(t, 0, code, stderr)
		assert.Equal(t, "would cancel 2 of 2 mails in lane tx\n", out)
		_, out, _ = ms("list", "--json", "--kind", "cancelled")
		assert.Equal(t, []int64{}, listIDs(t, out))

		// cancel: the retrying mail (3), not the sent one (1); one mail
		// is cancelled without asking.
		code, out, stderr = ms("cancel", "3", "1", "--json")
		assert.Equal(t, exitFailure, code)
		assert.Contains(t, stderr, "mail 1 is sent, not pending or retry")
		var res actionResult
		require.NoError(t, json.Unmarshal([]byte(out), &res))
		assert.Equal(t, actionResult{Lane: "tx", Matched: 2, Done: 1}, res)
		_, out, _ = ms("list", "--json", "--kind", "cancelled")
		assert.Equal(t, []int64{3}, listIDs(t, out))

		// retry --failed counts, then retries what matches.
		code, out, stderr = ms("retry", "--failed", "--template", "welcome", "--yes")
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, stderr, "1 failed mails in lane tx match")
		assert.Contains(t, out, "retried 1 of 1")
		code, out, _ = ms("retry", "--failed", "--yes")
		assert.Equal(t, 0, code)
		assert.Contains(t, out, "retried 0 of 0")

		// pause, stats, check, resume
		code, out, stderr = ms("pause", "--lane", "tx", "--reason", "provider incident")
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, out, "lane tx paused")
		s := laneStatsOf(t, db, cfg)
		require.Len(t, s.Paused, 1)
		assert.Equal(t, "operator", s.Paused[0].By)
		assert.Equal(t, "provider incident", s.Paused[0].Reason)
		assert.EqualValues(t, 2, s.Backlog, "mails 2 and 3 are pending again")
		_, out, _ = ms("stats")
		assert.Contains(t, out, "paused                by operator since")
		code, out, _ = ms("check")
		assert.Equal(t, checkWarning, code)
		assert.Regexp(t, `^WARNING: lane tx paused by operator since \S+: provider incident\n$`, out)
		code, _, stderr = ms("enqueue", "--from", "noreply@shop.example", "--to", "eve@example.com", "--subject", "s", "--text", "t")
		assert.Equal(t, 0, code, "enqueue goes on while paused: %s", stderr)
		code, _, _ = ms("pause")
		assert.Equal(t, exitUsage, code, "--lane is required")
		code, _, stderr = ms("resume", "--lane", "tx")
		require.Equal(t, 0, code, stderr)
		code, out, _ = ms("check")
		assert.Equal(t, checkOK, code, out)
		assert.Equal(t, "OK: lane tx backlog 3, failure rate 0.0% of 2, stuck 0\n", out)
		code, out, _ = ms("check", "--max-backlog", "2")
		assert.Equal(t, checkCritical, code)
		assert.Equal(t, "CRITICAL: lane tx backlog 3 over 2\n", out)
		code, out, _ = ms("check", "--max-backlog", "2", "--json")
		assert.Equal(t, checkCritical, code)
		var cr checkResult
		require.NoError(t, json.Unmarshal([]byte(out), &cr))
		assert.Equal(t, "critical", cr.Status)
		assert.Equal(t, "CRITICAL: lane tx backlog 3 over 2", cr.Line)
		require.Len(t, cr.Lanes, 1)
		assert.EqualValues(t, 3, cr.Lanes[0].Backlog)
		code, out, _ = ms("check", "--max-failure-rate", "lots")
		assert.Equal(t, checkUnknown, code, out)

		// cleanup: only the sent rows (1 and 4), by age.
		time.Sleep(5 * time.Millisecond)
		code, out, stderr = ms("cleanup", "--older-than", "1ms", "--status", "sent", "--dry-run")
		require.Equal(t, 0, code, stderr)
		assert.Equal(t, "lane tx: would delete 2 old rows\n", out)
		code, out, _ = ms("cleanup", "--older-than", "1ms", "--dry-run", "--json")
		assert.Equal(t, 0, code)
		assert.JSONEq(t, `{"deleted": {"tx": 2}, "dry_run": true}`, out)
		_, out, _ = ms("list", "--json")
		assert.Equal(t, []int64{5, 4, 3, 2, 1}, listIDs(t, out), "nothing deleted")
		code, out, stderr = ms("cleanup", "--older-than", "1ms", "--status", "sent")
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, out, "lane tx: deleted 2 old rows")
		assert.Contains(t, stderr, "lane tx: 2 rows deleted")
		_, out, _ = ms("list", "--json")
		assert.Equal(t, []int64{5, 3, 2}, listIDs(t, out))
		code, _, _ = ms("cleanup", "--status", "pending")
		assert.Equal(t, exitUsage, code)

		// migrate status
		code, out, stderr = ms("migrate", "status")
		require.Equal(t, 0, code, stderr)
		assert.Equal(t, fmt.Sprintf("lane tx: table mail_queue at schema version %d of %d, up to date\n", queue.SchemaVersion(), queue.SchemaVersion()), out)
	})
}

func TestMigrateStatusAndPrintSQL(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "q.db")
	code, out, _ := mailspool(t, "migrate", "status", "--db", db, "--json")
	assert.Equal(t, exitFailure, code, "not migrated")
	var st []tableStatus
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	assert.Equal(t, []tableStatus{{Lane: "default", Table: "mail_queue", Version: 0, Want: queue.SchemaVersion()}}, st)

	code, out, stderr := mailspool(t, "migrate", "--print-sql", "--db", db)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `CREATE TABLE IF NOT EXISTS "mail_queue"`)
	assert.Contains(t, out, `CREATE INDEX IF NOT EXISTS "mail_queue_idx_to"`)
	assert.Contains(t, out, `INSERT INTO "mailspool_schema"`)
	code, out, _ = mailspool(t, "migrate", "--print-sql", "--store", "mysql", "--from", "1", "--db", db)
	assert.Equal(t, 0, code)
	assert.NotContains(t, out, "CREATE TABLE IF NOT EXISTS `mail_queue`", "version 1 is there already")
	assert.Contains(t, out, "ALTER TABLE `mail_queue` ADD COLUMN to_hash")
	code, _, stderr = mailspool(t, "migrate", "--print-sql", "--store", "oracle")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, `unknown store "oracle"`)
	code, _, _ = mailspool(t, "migrate", "--from", "1", "--db", db)
	assert.Equal(t, exitUsage, code)
	// --print-sql connected to nothing: the database is still empty.
	code, _, _ = mailspool(t, "migrate", "status", "--db", db)
	assert.Equal(t, exitFailure, code)
}

func TestVersionAndHelp(t *testing.T) {
	code, out, stderr := mailspool(t, "version")
	require.Equal(t, 0, code, stderr)
	assert.Regexp(t, `^mailspool \S+.* go1\.\d+`, out)
	code, out, _ = mailspool(t, "version", "--json")
	require.Equal(t, 0, code)
	var v versionInfo
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	assert.NotEmpty(t, v.Go)

	code, out, _ = mailspool(t, "help")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "3  not found")
	for _, c := range commands {
		if c.summary == "" {
			continue // hidden (bench's child worker)
		}
		code, _, stderr := mailspool(t, c.name, "--help")
		assert.Equal(t, 0, code, c.name)
		assert.Contains(t, stderr, "Usage: mailspool "+c.name, c.name)
		assert.Contains(t, stderr, "Exit codes", c.name)
	}
}

func TestCheckUnknownWhenTheDatabaseIsGone(t *testing.T) {
	code, out, _ := mailspool(t, "check", "--db", "mysql://app:secret@127.0.0.1:1/app?timeout=1s")
	assert.Equal(t, checkUnknown, code)
	assert.True(t, strings.HasPrefix(out, "UNKNOWN: "), out)
	assert.NotContains(t, out, "secret")
	assert.Equal(t, 1, strings.Count(out, "\n"), "one line")
}

func TestEvaluate(t *testing.T) {
	th := thresholds{maxBacklog: 100, maxFailureRate: 0.2, minFinished: 20, maxStuck: 0}
	lane := func(name string, s queue.Stats, ps ...queue.Pause) laneStats {
		return laneStats{Lane: name, Stats: s, Paused: ps}
	}
	cases := []struct {
		stats []laneStats
		code  int
		line  string
	}{
		{[]laneStats{lane("tx", queue.Stats{Backlog: 5, SentLastHour: 10})}, checkOK, "OK: lane tx backlog 5, failure rate 0.0% of 10, stuck 0"},
		{[]laneStats{lane("tx", queue.Stats{FailedLastHour: 5, FailureRate: 1})}, checkOK, "OK: lane tx backlog 0, failure rate 100.0% of 5, stuck 0"},
		{[]laneStats{lane("tx", queue.Stats{SentLastHour: 16, FailedLastHour: 5, FailureRate: 5.0 / 21})}, checkCritical, "CRITICAL: lane tx failure rate 23.8% of 21 over 20.0%"},
		{[]laneStats{lane("tx", queue.Stats{Backlog: 101, Stuck: 1})}, checkCritical, "CRITICAL: lane tx backlog 101 over 100, 1 stuck in sending over 0"},
		{[]laneStats{lane("tx", queue.Stats{}, queue.Pause{By: "operator", Reason: "x"})}, checkWarning, "WARNING: lane tx paused by operator: x"},
		{[]laneStats{lane("a", queue.Stats{Stuck: 2}), lane("b", queue.Stats{}, queue.Pause{By: "breaker"})}, checkCritical, "CRITICAL: lane a 2 stuck in sending over 0; lane b paused by breaker"},
	}
	for _, c := range cases {
		code, line := evaluate(c.stats, th)
		assert.Equal(t, c.code, code, c.line)
		assert.Equal(t, c.line, line)
	}
	for in, want := range map[string]float64{"20%": 0.2, "0.05": 0.05, "100%": 1} {
		got, err := parseRate(in)
		require.NoError(t, err)
		assert.InDelta(t, want, got, 1e-9, in)
	}
	for _, bad := range []string{"lots", "120%", "-1", "NaN", "nan%", "Inf", "-Inf", "+Inf%"} {
		_, err := parseRate(bad)
		assert.Error(t, err, bad)
	}
}

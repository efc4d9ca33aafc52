package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// oneFakeLane is a config of one lane, tx, on the fake transport, which
// fails bob+550@ for good.
const oneFakeLane = `
[lanes.tx]
transport = "fake://?recipient=true"
recipient_limit = "off"
poll_interval = "10ms"
`

// seededCLI migrates a fresh SQLite queue and queues ann@ (1) and bob+550@
// (2); with send, the worker sends them: 1 is sent, 2 failed for good.
func seededCLI(t *testing.T, send bool) func(args ...string) (int, string, string) {
	t.Helper()
	return seededQueue(t, send).run
}

// aQueue is a migrated SQLite queue: its database URL, its config file,
// and run, which runs a command line on them.
type aQueue struct {
	db, config string
	run        func(args ...string) (int, string, string)
}

// seededQueue is seededCLI with the queue's database and config.
func seededQueue(t *testing.T, send bool) aQueue {
	t.Helper()
	q := aQueue{db: "sqlite:" + filepath.Join(t.TempDir(), "q.db"), config: writeFile(t, "mailspool.toml", oneFakeLane)}
	q.run = func(args ...string) (int, string, string) {
		t.Helper()
		return mailspool(t, append(args, "--db", q.db, "--config", q.config)...)
	}
	ms := q.run
	code, _, stderr := ms("migrate")
	require.Equal(t, 0, code, stderr)
	for _, to := range []string{"ann@example.com", "bob+550@example.com"} {
		code, _, stderr := ms("enqueue", "--from", "shop@example.com", "--to", to, "--subject", "s", "--text", "t", "--template", "welcome")
		require.Equal(t, 0, code, stderr)
	}
	if send {
		code, _, stderr := ms("worker", "--max-messages", "2", "--log-level", "warn")
		require.Equal(t, 0, code, stderr)
	}
	return q
}

// statuses is every mail's status by id, from list --json.
func statuses(t *testing.T, ms func(args ...string) (int, string, string)) map[int64]string {
	t.Helper()
	code, out, stderr := ms("list", "--json")
	require.Equal(t, 0, code, stderr)
	var rows []listedRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows), out)
	got := map[int64]string{}
	for _, r := range rows {
		got[r.ID] = string(r.Status)
	}
	return got
}

// An empty argument (an unset shell variable) names no mail: show used to
// take it for a lookup that matches every mail and show one of them.
func TestEmptyArgumentIsAUsageError(t *testing.T) {
	ms := seededCLI(t, false)
	for _, args := range [][]string{{"show", ""}, {"show", "--json", ""}, {"retry", "--yes", ""}, {"cancel", "--yes", ""}} {
		code, out, stderr := ms(args...)
		assert.Equal(t, exitUsage, code, "%q: %s%s", args, out, stderr)
		assert.Contains(t, stderr, "argument 1 is empty", args)
		assert.NotContains(t, out, "example.com", "%q shows a mail", args)
	}
	code, out, _ := ms("show", "--json", "")
	require.Equal(t, exitUsage, code)
	assert.Contains(t, out, `"code":"usage"`)
	assert.Equal(t, map[int64]string{1: "pending", 2: "pending"}, statuses(t, ms))
}

// A filter given explicitly with an empty value is refused: "retry --failed
// --to $ADDR --yes" with $ADDR unset used to retry every failed mail.
func TestEmptyFilterIsAUsageError(t *testing.T) {
	ms := seededCLI(t, true)
	require.Equal(t, map[int64]string{1: "sent", 2: "failed"}, statuses(t, ms))
	for _, args := range [][]string{
		{"retry", "--failed", "--yes", "--to", ""},
		{"retry", "--failed", "--yes", "--template="},
		{"retry", "--failed", "--yes", "--kind", ""},
		{"retry", "--failed", "--yes", "--since", ""},
		{"list", "--to", ""},
		{"list", "--template", ""},
		{"list", "--kind", ""},
		{"list", "--since", ""},
		{"list", "--status", ""},
		{"list", "--event", ""},
		{"list", "--message-id", ""},
		{"list", "--provider-id", ""},
		{"show", "--id", ""},
		{"show", "--message-id", ""},
		{"show", "--provider-id", ""},
		{"cleanup", "--status", ""},
		{"suppress", "list", "--reason", ""},
		{"suppress", "list", "--scope", ""},
		{"suppress", "list", "--address", ""},
		{"suppress", "list", "--since", ""},
		{"suppress", "list", "--until", ""},
		{"suppress", "export", "--scope", ""},
		{"suppress", "remove", "--scope", "", "bob+550@example.com"},
		{"retry", "--failed", "--yes", "--lane", ""},
		{"cleanup", "--lane", ""},
		{"migrate", "--lane", ""},
		{"pause", "--lane", ""},
		{"stats", "--lane", ""},
		{"check", "--lane", ""},
		{"enqueue", "--lane", "", "--from", "a@example.com", "--to", "b@example.com", "--subject", "s", "--text", "t"},
	} {
		code, out, stderr := ms(args...)
		want := exitUsage
		if args[0] == "check" {
			want = 3 // Nagios's UNKNOWN
		}
		assert.Equal(t, want, code, "%q: %s%s", args, out, stderr)
		flagName, _, _ := strings.Cut(args[len(args)-2], "=")
		if i := slices.Index(args, "--lane"); i >= 0 {
			flagName = "--lane"
		}
		if args[0] == "suppress" && args[1] == "remove" {
			flagName = "--scope"
		}
		if strings.HasSuffix(args[len(args)-1], "=") {
			flagName = strings.TrimSuffix(args[len(args)-1], "=")
		}
		assert.Contains(t, stderr, strings.TrimLeft(flagName, "-"), args)
		assert.Contains(t, stderr, "empty", args)
	}
	assert.Equal(t, map[int64]string{1: "sent", 2: "failed"}, statuses(t, ms), "nothing was retried")
	code, out, stderr := ms("retry", "--failed", "--yes", "--to", "nobody@example.com")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "retried 0 of 0 mails in lane tx\n", out)
}

// check --json answers a bad flag or threshold with its JSON report
// (UNKNOWN, exit 3), as it answers everything else.
func TestCheckJSONReportsUsageErrors(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "q.db")
	code, _, stderr := mailspool(t, "migrate", "--db", db)
	require.Equal(t, 0, code, stderr)
	for _, args := range [][]string{
		{"--json", "--timeout", "0s"},
		{"--json", "--max-backlog", "-1"},
		{"--json", "--max-failure-rate", "NaN"},
		{"--json", "--no-such-flag"},
		{"--no-such-flag", "--json"},
		{"--json=TRUE", "--timeout", "2h"},
		{"--json", "surplus"},
	} {
		code, out, stderr := mailspool(t, append([]string{"check", "--db", db}, args...)...)
		assert.Equal(t, checkUnknown, code, "%q: %s%s", args, out, stderr)
		var res checkResult
		require.NoError(t, json.Unmarshal([]byte(out), &res), "%q: %q", args, out)
		assert.Equal(t, "unknown", res.Status, args)
		assert.True(t, strings.HasPrefix(res.Line, "UNKNOWN: "), "%q: %s", args, res.Line)
		assert.NotEmpty(t, stderr, args)
	}
	// Text mode: the line a monitoring system shows (Nagios reads the
	// first line of stdout), and the error with the usage on stderr.
	code, out, stderr := mailspool(t, "check", "--db", db, "--timeout", "0s")
	assert.Equal(t, checkUnknown, code)
	assert.Equal(t, "UNKNOWN: --timeout 0s: want a duration above 0 and at most 1h\n", out)
	assert.NotEmpty(t, stderr)
	code, out, _ = mailspool(t, "check", "--db", db, "--json", "-h")
	assert.Equal(t, 0, code)
	assert.Empty(t, out)
}

// Two flags that say the same thing differently are refused, not resolved
// silently by one of them winning.
func TestConflictingInputsRefused(t *testing.T) {
	ms := seededCLI(t, false)
	dir := t.TempDir()
	body := filepath.Join(dir, "body.txt")
	require.NoError(t, os.WriteFile(body, []byte("from the file"), 0o600))
	att := filepath.Join(dir, "a.txt")
	require.NoError(t, os.WriteFile(att, []byte("hello"), 0o600))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--text", "x", "--text-file", body}, "--text and --text-file"},
		{[]string{"--html", "<p>x</p>", "--html-file", body}, "--html and --html-file"},
		{[]string{"--html", `<img src="cid:c1">`, "--attach", att + ";inline=c1;inline=c2"}, "inline= given twice"},
		{[]string{"--attach", att + ";type=text/csv;type=image/png"}, "type= given twice"},
	} {
		args := append([]string{"enqueue", "--from", "shop@example.com", "--to", "cy@example.com", "--subject", "s", "--text", "t"}, c.args...)
		if c.args[0] == "--text" {
			args = append([]string{"enqueue", "--from", "shop@example.com", "--to", "cy@example.com", "--subject", "s"}, c.args...)
		}
		code, out, stderr := ms(args...)
		assert.Equal(t, exitUsage, code, "%q: %s%s", c.args, out, stderr)
		assert.Contains(t, stderr, c.want, c.args)
	}
	assert.Len(t, statuses(t, ms), 2, "nothing was queued")

	cfg := writeFile(t, "mailspool.toml", oneFakeLane)
	for _, extra := range [][]string{{"--lane", "tx"}, {"--config", cfg}, {"--lane", ""}} {
		args := append([]string{"send-test", "--transport", "fake://", "--from", "a@example.com", "--to", "b@example.com"}, extra...)
		code, out, stderr := mailspool(t, args...)
		assert.Equal(t, exitUsage, code, "%q: %s%s", extra, out, stderr)
		assert.Contains(t, stderr, "--transport", extra)
		assert.Contains(t, stderr, extra[0], extra)
	}
}

// A number out of range is refused, never taken for "not given".
func TestOutOfRangeNumbersRefused(t *testing.T) {
	q := seededQueue(t, false)
	ms := q.run
	// Bounded: the worker used to run as if --max-messages were not given.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, errOut bytes.Buffer
	code := run(ctx, &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &errOut}, []string{"worker", "--max-messages", "-5", "--db", q.db, "--config", q.config})
	assert.Equal(t, exitUsage, code, errOut.String())
	assert.Contains(t, errOut.String(), "--max-messages -5")
	var out, stderr string
	assert.Equal(t, map[int64]string{1: "pending", 2: "pending"}, statuses(t, ms), "the worker sent nothing")

	code, out, stderr = ms("enqueue", "--from", "shop@example.com", "--to", "cy@example.com", "--subject", "s", "--text", "t", "--max-attempts", "0")
	assert.NotEqual(t, 0, code, out)
	assert.Contains(t, stderr, "max attempts 0 out of range")
	file := writeFile(t, "mails.json", `{"from": "shop@example.com", "to": "cy@example.com", "subject": "s", "text": "t", "max_attempts": 0}`)
	code, out, stderr = ms("enqueue", "--file", file)
	assert.NotEqual(t, 0, code, out)
	assert.Contains(t, stderr, "max attempts 0 out of range")
	assert.Len(t, statuses(t, ms), 2, "nothing was queued")

	file = writeFile(t, "mails.json", `{"from": "shop@example.com", "to": "cy@example.com", "subject": "s", "text": "t", "max_attempts": 2}`)
	code, _, stderr = ms("enqueue", "--file", file)
	require.Equal(t, 0, code, stderr)
	code, _, stderr = ms("enqueue", "--from", "shop@example.com", "--to", "dy@example.com", "--subject", "s", "--text", "t")
	require.Equal(t, 0, code, stderr)
	code, out, _ = ms("list", "--json")
	require.Equal(t, 0, code)
	var rows []listedRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Len(t, rows, 4)
	assert.Equal(t, 5, rows[0].MaxAttempts, "no --max-attempts: the lane's default")
	assert.Equal(t, 2, rows[1].MaxAttempts, "max_attempts 2 as given")
}

// --json takes every spelling of true package flag accepts, for the error
// as for the result; a flag's value that looks like --json asks for nothing.
func TestJSONFlagSpellings(t *testing.T) {
	ms := seededCLI(t, false)
	for _, spelling := range []string{"--json", "-json", "--json=true", "--json=TRUE", "--json=True", "--json=t", "--json=T", "--json=1"} {
		code, out, stderr := ms("show", spelling, "99")
		assert.Equal(t, exitNotFound, code, spelling, stderr)
		assert.Contains(t, out, `"code":"not_found"`, spelling)
	}
	for _, spelling := range []string{"--json=false", "--json=F", "--json=0"} {
		code, out, _ := ms("show", spelling, "99")
		assert.Equal(t, exitNotFound, code, spelling)
		assert.Empty(t, out, spelling)
	}
	code, out, _ := ms("show", "--json", "--json=false", "99")
	assert.Equal(t, exitNotFound, code)
	assert.Empty(t, out, "the last --json counts")
	// -json as the value of --subject or --to asks for no JSON.
	for _, args := range [][]string{
		{"enqueue", "--subject", "-json", "--to", "cy@example.com", "--text", "t"},
		{"enqueue", "--from", "shop@example.com", "--to", "--json", "--subject", "s", "--text", "t"},
		{"list", "--to", "-json", "--limit", "0"},
	} {
		code, out, stderr := ms(args...)
		assert.NotEqual(t, 0, code, "%q: %s", args, stderr)
		assert.Empty(t, out, args)
	}
	// An unknown flag before --json still gets the JSON error.
	code, out, _ = ms("list", "--no-such-flag", "--json")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, out, `"code":"usage"`)
}

// TestCleanupJSONErrorSaysWhatWasDeleted: a cleanup that fails in one lane
// after deleting rows of another says, in --json's error, how many each
// lane had deleted: those rows are gone whatever the error, and a script
// reading only the error would not know it.
func TestCleanupJSONErrorSaysWhatWasDeleted(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "q.db")
	db := "sqlite:" + file
	cfg := writeFile(t, "mailspool.toml", "[lanes.a]\ntable = \"a_q\"\ntransport = \"fake://\"\n[lanes.b]\ntable = \"b_q\"\ntransport = \"fake://\"\n")
	code, _, stderr := mailspool(t, "migrate", "--db", db, "--config", cfg)
	require.Equal(t, 0, code, stderr)
	for _, lane := range []string{"a", "b"} {
		code, _, stderr = mailspool(t, "enqueue", "--db", db, "--config", cfg, "--lane", lane, "--from", "noreply@shop.example", "--to", "ann@example.com", "--subject", "s", "--text", "t")
		require.Equal(t, 0, code, stderr)
	}
	h, err := dburl.Open(db)
	require.NoError(t, err)
	defer h.Close()
	for _, table := range []string{"a_q", "b_q"} {
		_, err = h.Exec(`UPDATE `+table+` SET status = ?, next_run = 0`, queue.StatusSent)
		require.NoError(t, err)
	}
	// Lane b's cleanup fails: its bodies' table is gone.
	_, err = h.Exec(`DROP TABLE b_q_bodies`)
	require.NoError(t, err)

	code, out, stderr := mailspool(t, "cleanup", "--db", db, "--config", cfg, "--older-than", "1ms", "--json")
	assert.Equal(t, exitFailure, code, stderr)
	var res jsonError
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Contains(t, res.Error.Message, "lane b")
	assert.Equal(t, map[string]int64{"a": 1, "b": 0}, res.Error.Deleted)
}

package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Stored text that holds terminal escape sequences (ESC ]52 sets the
// clipboard, ESC [2J clears the screen) or newlines is printed escaped by
// show, list, stats and check; template names, idempotency keys and pause
// reasons with control characters are refused.
func TestStoredTextIsEscapedOnTheTerminal(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "q.db")
	code, _, stderr := mailspool(t, "migrate", "--db", db)
	require.Equal(t, 0, code, stderr)
	hostile := "\x1b]52;c;aGk=\x07\x1b[2J"

	for _, args := range [][]string{
		{"--template", "welcome" + hostile},
		{"--template", "welcome\nforged"},
		{"--idempotency-key", "k" + hostile},
		{"--idempotency-key", "k\u202e"},
	} {
		code, _, stderr := mailspool(t, append([]string{"enqueue", "--db", db, "--from", "a@example.com", "--to", "b@example.com", "--subject", "s", "--text", "t"}, args...)...)
		assert.Equal(t, exitFailure, code, "%q", args)
		assert.Contains(t, stderr, "control character", "%q", args)
	}
	code, _, stderr = mailspool(t, "pause", "--db", db, "--lane", "default", "--reason", "incident"+hostile)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "pause reason contains the control character U+001B")

	// The subject and the body may hold them (the mail is final as given);
	// they are shown escaped.
	code, _, stderr = mailspool(t, "enqueue", "--db", db, "--from", "a@example.com", "--to", "b@example.com",
		"--subject", "hello"+hostile, "--text", "line 1\nline 2"+hostile, "--header", "X-Tag: v"+hostile)
	require.Equal(t, 0, code, stderr)
	for _, args := range [][]string{{"show", "1", "--full"}, {"list"}, {"stats"}, {"check"}} {
		code, out, stderr := mailspool(t, append(args, "--db", db)...)
		assert.Contains(t, []int{0, checkWarning}, code, "%v: %s", args, stderr)
		assert.NotContains(t, out, "\x1b", args)
		assert.NotContains(t, out, "\x07", args)
		if args[0] == "show" {
			assert.Contains(t, out, `subject      hello\x1b]52;c;aGk=\x07\x1b[2J`)
			assert.Contains(t, out, "line 1\nline 2\\x1b]52", "the body keeps its lines")
			assert.Contains(t, out, `X-Tag: v\x1b]52`)
		}
	}
	code, out, _ := mailspool(t, "show", "1", "--json", "--db", db)
	require.Equal(t, 0, code)
	assert.Contains(t, out, `hello\u001b]52;c;aGk=\u0007\u001b[2J`, "JSON escapes by itself")
	assert.False(t, strings.Contains(out, "\x1b"))
}

// No read-only command creates the SQLite file it is pointed at, migrate
// status included: it reports the tables as never migrated.
func TestReadOnlyCommandsNeverCreateTheSQLiteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	db := "sqlite:" + path
	for _, args := range [][]string{
		{"migrate", "status"}, {"migrate", "status", "--json"}, {"stats"}, {"check"}, {"list"}, {"show", "1"},
		{"cancel", "1"}, {"retry", "1"}, {"pause", "--lane", "default"}, {"resume", "--lane", "default"}, {"cleanup"},
	} {
		code, out, stderr := mailspool(t, append(args, "--db", db)...)
		assert.NotEqual(t, 0, code, "%v: %s", args, out)
		assert.NoFileExists(t, path, "%v: %s%s", args, out, stderr)
		assert.NoFileExists(t, path+"-wal", "%v", args)
	}
	_, out, _ := mailspool(t, "migrate", "status", "--db", db)
	assert.Contains(t, out, "schema version 0")
}

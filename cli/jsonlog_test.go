package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWorkerJSONLogs: with --log-format json every line of a worker run
// names its lane (two lanes here), and durations are seconds as numbers
// under a *_seconds key, not nanoseconds nor Go duration strings.
func TestWorkerJSONLogs(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "q.db")
	ms := migratedCLI(t, db, twoFakeLanes)
	for _, lane := range []string{"tx", "bulk"} {
		code, _, stderr := ms("enqueue", "--lane", lane, "--from", "shop@shop.example", "--to", "ann@example.com", "--subject", "s", "--text", "hi")
		require.Equal(t, 0, code, stderr)
	}
	code, _, stderr := ms("worker", "--max-messages", "1", "--log-format", "json", "--log-level", "debug")
	require.Equal(t, 0, code, stderr)

	sentLines := 0
	for line := range strings.SplitSeq(strings.TrimSpace(stderr), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		lane, _ := rec["lane"].(string)
		assert.Contains(t, []string{"tx", "bulk"}, lane, "every line names its lane: %s", line)
		if rec["msg"] == "mail sent" {
			sentLines++
			took, ok := rec["took_seconds"].(float64)
			assert.True(t, ok, "a send's time is took_seconds, a number: %s", line)
			assert.Less(t, took, 60.0, "seconds, not nanoseconds: %s", line)
			assert.NotContains(t, rec, "took")
		}
	}
	// --max-messages 1 ends the process when the first lane has sent its
	// one mail: the other lane may or may not have sent its own by then.
	assert.GreaterOrEqual(t, sentLines, 1, stderr)
	assert.LessOrEqual(t, sentLines, 2, stderr)
}

package cli

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLookupByMessageAndProviderID: support finds a sent mail by the
// Message-ID header a user forwards and by the id the provider returned,
// with show and list, in whichever lane it is; a lookup nobody matches is
// not found (exit 3).
func TestLookupByMessageAndProviderID(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db string) {
		ms := migratedCLI(t, db, twoFakeLanes)
		for _, lane := range []string{"tx", "bulk", "bulk"} {
			code, _, stderr := ms("enqueue", "--lane", lane, "--from", "shop@shop.example", "--to", "ann@example.com", "--subject", "s", "--text", "hi")
			require.Equal(t, 0, code, stderr)
		}
		code, _, stderr := ms("worker", "--lane", "bulk", "--max-messages", "2", "--log-level", "warn")
		require.Equal(t, 0, code, stderr)

		var out string
		code, out, stderr = ms("show", "--json", "bulk/2")
		require.Equal(t, 0, code, stderr)
		var want shownMail
		require.NoError(t, json.Unmarshal([]byte(out), &want))
		require.NotEmpty(t, want.ProviderID, "the fake transport answers with an id")

		for _, by := range [][]string{{"--message-id", want.MessageID}, {"--message-id", "<" + want.MessageID + ">"}, {"--provider-id", want.ProviderID}} {
			code, out, stderr := ms("show", "--json", by[0], by[1])
			require.Equal(t, 0, code, "%v: %s", by, stderr)
			var got shownMail
			require.NoError(t, json.Unmarshal([]byte(out), &got))
			assert.Equal(t, "bulk", got.Lane, "%v", by)
			assert.Equal(t, int64(2), got.ID, "%v", by)

			code, out, stderr = ms("list", "--json", by[0], by[1])
			require.Equal(t, 0, code, stderr)
			assert.Equal(t, []int64{2}, listIDs(t, out), "%v", by)
		}
		code, _, stderr = ms("show", "--message-id", "nobody@nowhere.example")
		assert.Equal(t, exitNotFound, code, stderr)
		assert.Contains(t, stderr, "no mail has --message-id nobody@nowhere.example")
	})
}

// twoFakeLanes is a config of two lanes, tx and bulk, on the fake
// transport, each lane with its own table.
const twoFakeLanes = `
[lanes.tx]
transport = "fake://"
recipient_limit = "off"
poll_interval = "10ms"
[lanes.bulk]
transport = "fake://"
table = "mail_bulk"
recipient_limit = "off"
poll_interval = "10ms"
`

// migratedCLI writes config to a file, migrates database db with it, and
// returns a runner of command lines on both.
func migratedCLI(t *testing.T, db, config string) func(args ...string) (int, string, string) {
	t.Helper()
	cfg := writeFile(t, "mailspool.toml", config)
	ms := func(args ...string) (int, string, string) {
		t.Helper()
		return mailspool(t, append(args, "--db", db, "--config", cfg)...)
	}
	code, _, stderr := ms("migrate")
	require.Equal(t, 0, code, stderr)
	return ms
}

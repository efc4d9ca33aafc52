package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mailspool/mailspool/inbound"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/suppress"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSuppressCommands(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db string) {
		code, _, stderr := mailspool(t, "migrate", "--db", db)
		require.Zero(t, code, stderr)

		code, out, stderr := mailspool(t, "suppress", "add", "--db", db, "--reason", "hard_bounce", "Gone@Example.com", "other@example.com")
		require.Zero(t, code, stderr)
		assert.Contains(t, out, "suppressed 2")
		code, _, stderr = mailspool(t, "suppress", "add", "--db", db, "--reason", "soft_bounce", "x@example.com")
		assert.Equal(t, exitUsage, code)
		assert.Contains(t, stderr, "soft_bounce")

		code, out, stderr = mailspool(t, "suppress", "list", "--db", db, "--json")
		require.Zero(t, code, stderr)
		var es []suppress.Entry
		require.NoError(t, json.Unmarshal([]byte(out), &es), out)
		require.Len(t, es, 2)
		assert.Equal(t, suppress.HardBounce, es[0].Reason)

		// enqueue to a suppressed address: its own exit code, the reason named.
		code, _, stderr = mailspool(t, "enqueue", "--db", db, "--from", "shop@example.com", "--to", "gone@example.com", "--subject", "s", "--text", "t")
		assert.Equal(t, exitSuppressed, code, stderr)
		assert.Contains(t, stderr, "gone@example.com is suppressed: hard_bounce since")

		// export, remove everything, import the export back.
		dir := t.TempDir()
		for _, format := range []string{"csv", "json"} {
			file := filepath.Join(dir, "list."+format)
			code, _, stderr = mailspool(t, "suppress", "export", "--db", db, "--output", file)
			require.Zero(t, code, stderr)
			code, _, stderr = mailspool(t, "suppress", "remove", "--db", db, "gone@example.com", "other@example.com")
			require.Zero(t, code, stderr)
			code, out, _ = mailspool(t, "suppress", "list", "--db", db, "--json")
			require.Zero(t, code)
			assert.JSONEq(t, "[]", out)
			code, out, stderr = mailspool(t, "suppress", "import", "--db", db, file)
			require.Zero(t, code, stderr)
			assert.Contains(t, out, "imported 2 entries")
			code, out, _ = mailspool(t, "suppress", "list", "--db", db, "--json", "--reason", "hard_bounce", "--address", "GONE@example.com")
			require.Zero(t, code)
			require.NoError(t, json.Unmarshal([]byte(out), &es))
			require.Len(t, es, 1, format)
		}

		// a bad import changes nothing.
		bad := filepath.Join(dir, "bad.csv")
		require.NoError(t, os.WriteFile(bad, []byte("email\nnew@example.com\nnot-an-address\n"), 0o600))
		code, _, stderr = mailspool(t, "suppress", "import", "--db", db, bad)
		assert.Equal(t, exitFailure, code)
		assert.Contains(t, stderr, "line 3")
		code, out, _ = mailspool(t, "suppress", "list", "--db", db, "--json", "--address", "new@example.com")
		require.Zero(t, code)
		assert.JSONEq(t, "[]", out)

		code, _, _ = mailspool(t, "suppress", "remove", "--db", db, "never@example.com")
		assert.Equal(t, exitNotFound, code)
	})
}

func TestListEventAndShowEvents(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "q.db")
	code, _, stderr := mailspool(t, "migrate", "--db", db)
	require.Zero(t, code, stderr)
	for _, to := range []string{"gone@example.com", "fine@example.com"} {
		code, _, stderr := mailspool(t, "enqueue", "--db", db, "--from", "shop@example.com", "--to", to, "--subject", "s", "--text", "t")
		require.Zero(t, code, stderr)
	}
	sqlDB, err := dburl.Open(db)
	require.NoError(t, err)
	defer sqlDB.Close()
	_, err = sqlDB.Exec(`UPDATE mail_queue SET status = 2, provider_id = 'pid-' || to_addr`)
	require.NoError(t, err)
	store, err := inbound.OpenStore(sqlDB)
	require.NoError(t, err)
	_, err = store.Record(t.Context(), []inbound.Event{{Provider: inbound.SendGrid, EventID: "e1", Type: inbound.Bounced,
		Recipient: "gone@example.com", ProviderMessageID: "pid-gone@example.com", Time: time.Now(), Detail: "550 5.1.1"}})
	require.NoError(t, err)

	code, out, stderr := mailspool(t, "list", "--db", db, "--event", "bounced", "--json")
	require.Zero(t, code, stderr)
	var rows []listedRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows), out)
	require.Len(t, rows, 1)
	assert.Equal(t, "gone@example.com", rows[0].To)

	code, out, stderr = mailspool(t, "show", "--db", db, strconv.FormatInt(rows[0].ID, 10))
	require.Zero(t, code, stderr)
	assert.Regexp(t, `events\s+\S+ sendgrid bounced gone@example.com 550 5.1.1`, out)

	code, _, stderr = mailspool(t, "list", "--db", db, "--event", "exploded")
	assert.Equal(t, exitUsage, code, stderr)
}

// suppress remove --release makes the mail held for the address due at
// once, in the transaction that removes it; without --release it waits.
func TestSuppressRemoveRelease(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "q.db")
	code, _, stderr := mailspool(t, "migrate", "--db", db)
	require.Zero(t, code, stderr)
	code, _, stderr = mailspool(t, "enqueue", "--db", db, "--from", "shop@example.com", "--to", "held@example.com", "--subject", "s", "--text", "t")
	require.Zero(t, code, stderr)
	code, _, stderr = mailspool(t, "suppress", "add", "--db", db, "--reason", "manual", "held@example.com")
	require.Zero(t, code, stderr)
	sqlDB, err := dburl.Open(db)
	require.NoError(t, err)
	defer sqlDB.Close()
	// As a claim under a lane that holds leaves it (suppress's tests
	// drive that claim): pending, kind held, due in a day.
	later := time.Now().Add(24 * time.Hour).UnixMilli()
	_, err = sqlDB.Exec(`UPDATE mail_queue SET last_kind = 'held', next_run = ?`, later)
	require.NoError(t, err)

	code, out, stderr := mailspool(t, "suppress", "remove", "--db", db, "--release", "Held@example.com")
	require.Zero(t, code, stderr)
	assert.Contains(t, out, "removed Held@example.com (1 entry), released 1 held mail(s)")
	var due int64
	require.NoError(t, sqlDB.QueryRow(`SELECT next_run FROM mail_queue`).Scan(&due))
	assert.LessOrEqual(t, due, time.Now().UnixMilli(), "due at once")
}

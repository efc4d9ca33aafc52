package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWorkerWithoutTransportRefuses: without a config file there is no
// transport; the worker refuses to start, says how to configure one, and
// the queued mail stays pending (the fake used to mark it sent).
func TestWorkerWithoutTransportRefuses(t *testing.T) {
	t.Setenv("MAILSPOOL_LANE_DEFAULT_TRANSPORT", "")
	forEachDatabase(t, func(t *testing.T, db string) {
		t.Setenv("MAILSPOOL_DATABASE", db)
		code, _, stderr := mailspool(t, "migrate")
		require.Equal(t, 0, code, stderr)
		code, _, stderr = mailspool(t, "enqueue", "--from", "shop@example.com", "--to", "ann@example.com", "--subject", "Reset your password", "--text", "t")
		require.Equal(t, 0, code, stderr)
		code, _, stderr = mailspool(t, "worker", "--max-messages", "1")
		assert.Equal(t, exitFailure, code)
		assert.Contains(t, stderr, "lane default has no transport")
		assert.Contains(t, stderr, "MAILSPOOL_LANE_DEFAULT_TRANSPORT")
		code, out, _ := mailspool(t, "stats", "--json")
		require.Equal(t, 0, code)
		assert.Contains(t, out, `"pending": 1`)
	})
}

// TestSendTestNeedsATransportAndNamesTheFake: send-test without a
// transport refuses; on the fake it says nothing was delivered.
func TestSendTestNeedsATransportAndNamesTheFake(t *testing.T) {
	t.Setenv("MAILSPOOL_LANE_DEFAULT_TRANSPORT", "")
	code, out, stderr := mailspool(t, "send-test", "--from", "a@example.com", "--to", "b@example.com")
	assert.Equal(t, exitFailure, code)
	assert.Empty(t, out)
	assert.Contains(t, stderr, "has no transport")
	assert.Contains(t, stderr, "--transport")

	code, out, stderr = mailspool(t, "send-test", "--transport", "fake://", "--from", "a@example.com", "--to", "b@example.com")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "is the fake")
	assert.Contains(t, out, "delivers nothing")
	code, out, _ = mailspool(t, "send-test", "--json", "--transport", "fake://", "--from", "a@example.com", "--to", "b@example.com")
	require.Equal(t, 0, code)
	assert.Contains(t, out, `"fake": true`)
}

// TestReadOnlyCommandsBeforeMigrate: stats, show and cleanup on a database
// that was never migrated say to run migrate, and create no SQLite file; a
// missing directory is named.
func TestReadOnlyCommandsBeforeMigrate(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db string) {
		for _, args := range [][]string{{"stats"}, {"show", "--id", "1"}, {"cleanup"}} {
			code, _, stderr := mailspool(t, append(args, "--db", db)...)
			assert.Equal(t, exitFailure, code, args)
			assert.Contains(t, stderr, "run 'mailspool migrate'", args)
		}
		if path, ok := strings.CutPrefix(db, "sqlite:"); ok {
			_, err := os.Stat(path)
			assert.ErrorIs(t, err, os.ErrNotExist, "the SQLite file was created")
		}
	})
	missing := filepath.Join(t.TempDir(), "no-such-dir")
	for _, cmd := range []string{"stats", "migrate"} {
		code, _, stderr := mailspool(t, cmd, "--db", "sqlite:"+filepath.Join(missing, "q.db"))
		assert.Equal(t, exitFailure, code, cmd)
		assert.Contains(t, stderr, "the directory "+missing+" does not exist", cmd)
	}
}

// TestEnqueueFileIsStrict: what encoding/json lets through is refused, and
// nothing is queued.
func TestEnqueueFileIsStrict(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "q.db")
	code, _, stderr := mailspool(t, "migrate", "--db", db)
	require.Equal(t, 0, code, stderr)
	mail := `"from":"a@example.com","subject":"s","text":"t"`
	for content, want := range map[string]string{
		`{` + mail + `,"to":"a@x.example"} {"to":"b@y.example"}`:                 "after the JSON value",
		`{` + mail + `,"to":"a@x.example"} trailing`:                             "after the JSON value",
		`{` + mail + `,"to":"a@x.example","TO":"b@y.example"}`:                   `key "to" given twice`,
		`{` + mail + `,"to":"a@x.example","to":"b@y.example"}`:                   `key "to" given twice`,
		`{` + mail + `,"To":"b@y.example"}`:                                      `keys are written exactly as "to"`,
		`{` + mail + `,"to":"b@y.example","headers":[{"Name":"X","value":"v"}]}`: `keys are written exactly as "name"`,
		// encoding/json matches keys with bytes.EqualFold: U+017F (long
		// s) matches s, U+212A (Kelvin) matches k.
		`{"from":"a@example.com","to":"a@x.example","text":"t","subject":"s","ſubject":"evil"}`: `given twice`,
		`{"from":"a@example.com","to":"a@x.example","text":"t","ſubject":"evil"}`:               `keys are written exactly as "subject"`,
		`{` + mail + `,"to":"a@x.example","idempotency_Key":"k"}`:                               `keys are written exactly as "idempotency_key"`,
		"{" + mail + ",\"to\":\"b\xff@y.example\"}":                                             "not valid UTF-8",
		`{` + mail + `,"to":"b\ud800@y.example"}`:                                               "lone UTF-16 surrogate",
		`{` + mail + `,"to":"b\udc00\ud800@y.example"}`:                                         "lone UTF-16 surrogate",
	} {
		code, _, stderr := mailspoolIn(t, content, "enqueue", "--db", db, "--file", "-")
		assert.Equal(t, exitFailure, code, content)
		assert.Contains(t, stderr, want, content)
	}
	// A correct pair and an escaped backslash are fine.
	code, _, stderr = mailspoolIn(t, `{"from":"a@example.com","text":"t","to":"b@y.example","subject":"\ud83d\ude00 \\ud800"}`, "enqueue", "--db", db, "--file", "-")
	require.Equal(t, 0, code, stderr)
	code, out, _ := mailspool(t, "stats", "--db", db, "--json")
	require.Equal(t, 0, code)
	assert.Contains(t, out, `"pending": 1`, "only the valid mail was queued")
}

// TestEnqueueFileRepeatedIdempotencyKey: the count printed is the rows
// queued, not the mails in the file.
func TestEnqueueFileRepeatedIdempotencyKey(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "q.db")
	code, _, stderr := mailspool(t, "migrate", "--db", db)
	require.Equal(t, 0, code, stderr)
	m := `{"from":"a@example.com","to":"b@example.com","subject":"s","text":"t","idempotency_key":"k1"}`
	other := `{"from":"a@example.com","to":"c@example.com","subject":"s","text":"t"}`
	code, out, stderr := mailspoolIn(t, "["+m+","+m+","+other+"]", "enqueue", "--db", db, "--file", "-")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "queued 2 mails")
	assert.Contains(t, out, "1 of the 3 given repeat an idempotency key")
}

// TestEnqueueInputBounds: a --delay that overflows is an error, and a body
// file over the size limit is refused after reading one byte more than it.
func TestEnqueueInputBounds(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "q.db")
	code, _, stderr := mailspool(t, "migrate", "--db", db)
	require.Equal(t, 0, code, stderr)
	base := []string{"enqueue", "--db", db, "--from", "a@example.com", "--to", "b@example.com", "--subject", "s"}
	code, _, stderr = mailspool(t, append(base, "--text", "t", "--delay", "213504d")...)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, `"213504d" is too long`)

	big := filepath.Join(t.TempDir(), "big.txt")
	f, err := os.Create(big)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(64<<20)) // sparse: 64 MiB that take no disk
	require.NoError(t, f.Close())
	code, _, stderr = mailspool(t, append(base, "--text-file", big)...)
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "--text-file: "+big+" is larger than the message size limit")
}

// TestDatabaseURLErrorsHideThePassword: --db values that do not parse
// never come back whole.
func TestDatabaseURLErrorsHideThePassword(t *testing.T) {
	for _, db := range []string{
		"mysql://root:s3cret/PW@127.0.0.1:3306/app",
		"mysql://root:s3c#ret@127.0.0.1:3306/app",
		"root:s3cret@tcp(127.0.0.1:3306)/app",
		"root:s3cret@db.internal",
	} {
		code, out, stderr := mailspool(t, "stats", "--db", db)
		assert.Equal(t, exitFailure, code, db)
		assert.NotContains(t, out+stderr, "s3c", db)
	}
	code, _, stderr := mailspool(t, "stats", "--db", "mysql://root@127.0.0.1:3306/app?parseTime=maybe")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "invalid bool value: maybe")
}

// TestEnqueueBoundedUnderLockTables: with the queue table held by LOCK
// TABLES in another session, "mailspool enqueue" gives up after the lane's
// lock_timeout with a clear error, and nothing is queued (it used to wait
// for the server's lock_wait_timeout, a day).
func TestEnqueueBoundedUnderLockTables(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db string) {
		if strings.HasPrefix(db, "sqlite:") {
			t.Skip("SQLite has no LOCK TABLES; its wait is the busy timeout (queue's TestEnqueueBoundedUnderTableLock)")
		}
		cfg := writeFile(t, "mailspool.toml", "[lanes.tx]\ntransport = \"fake://\"\nlock_timeout = \"1s\"\n")
		code, _, stderr := mailspool(t, "migrate", "--db", db, "--config", cfg)
		require.Equal(t, 0, code, stderr)
		admin, err := dburl.Open(db)
		require.NoError(t, err)
		defer admin.Close()
		holder, err := admin.Conn(context.Background())
		require.NoError(t, err)
		defer holder.Close()
		lock, unlock := "LOCK TABLES mail_queue WRITE, mail_queue_limits WRITE", "UNLOCK TABLES"
		if strings.HasPrefix(db, "postgres:") {
			_, err = holder.ExecContext(context.Background(), "BEGIN")
			require.NoError(t, err)
			lock, unlock = "LOCK TABLE mail_queue, mail_queue_limits IN ACCESS EXCLUSIVE MODE", "ROLLBACK"
		}
		_, err = holder.ExecContext(context.Background(), lock)
		require.NoError(t, err)
		code, _, stderr = mailspool(t, "enqueue", "--db", db, "--config", cfg, "--from", "a@example.com", "--to", "b@example.com", "--subject", "s", "--text", "t")
		assert.Equal(t, exitFailure, code)
		if strings.HasPrefix(db, "postgres:") {
			assert.Contains(t, stderr, "waited more than its lock_timeout for a lock") // the lane's 1s (SET LOCAL)
		} else {
			assert.Contains(t, stderr, "waited more than 1s for a lock")
		}
		_, err = holder.ExecContext(context.Background(), unlock)
		require.NoError(t, err)
		code, out, _ := mailspool(t, "stats", "--db", db, "--config", cfg, "--json")
		require.Equal(t, 0, code)
		assert.Contains(t, out, `"pending": 0`)
	})
}

// TestWorkerStartLineNamesItsTransportRedacted: the operator sees which
// transport a worker sends through, without its password.
func TestWorkerStartLineNamesItsTransportRedacted(t *testing.T) {
	t.Setenv("MAILSPOOL_LANE_DEFAULT_TRANSPORT", "fake://mailer:hunter2@relay.example?script=ok")
	db := "sqlite:" + filepath.Join(t.TempDir(), "q.db")
	code, _, stderr := mailspool(t, "migrate", "--db", db)
	require.Equal(t, 0, code, stderr)
	code, _, stderr = mailspool(t, "enqueue", "--db", db, "--from", "a@example.com", "--to", "b@example.com", "--subject", "s", "--text", "t")
	require.Equal(t, 0, code, stderr)
	code, _, stderr = mailspool(t, "worker", "--db", db, "--max-messages", "1")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, `transport="fake://mailer:xxxxx@relay.example?script=ok"`)
	assert.NotContains(t, stderr, "hunter2")
}

// TestSendTestErrorsHideTransportSecrets: a transport URL's secret is not
// shown when the URL is wrong, wherever it is: a composite member's
// password with a "/", a SendGrid key put in the user name, a password in
// a URL given as a query value.
func TestSendTestErrorsHideTransportSecrets(t *testing.T) {
	for tr, want := range map[string]string{
		"roundrobin(smtp://u:S3C/RET@h, fake://; weights=0,1)":                          "of member 1 (smtp://h)",
		"sendgrid://SG.S3CRET@default?bogus=1":                                          "user name must be empty",
		"ses://S3CRET@default?bogus=1":                                                  "ACCESS_KEY_ID:SECRET_ACCESS_KEY",
		"sendgrid://apikey:K@eu?endpoint=https://proxyuser:S3CRET@proxy.example":        "both the host",
		"sendgrid://apikey:K@default?endpoint=https://S3CRET@proxy.example":             "must not contain user info",
		"failover(sendgrid://apikey:K@eu?endpoint=https://u:S3CRET@p.example, fake://)": "both the host",
	} {
		for _, args := range [][]string{{}, {"--json"}} {
			code, stdout, stderr := mailspool(t, append([]string{"send-test", "--from", "a@x.example", "--to", "b@y.example", "--transport", tr}, args...)...)
			assert.NotEqual(t, 0, code, tr)
			assert.Contains(t, stdout+stderr, want, tr)
			assert.NotContains(t, stdout+stderr, "S3C", tr)
		}
	}
}

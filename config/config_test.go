package config_test

import (
	"context"
	"net/mail"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mailspool/mailspool/classify"
	"github.com/mailspool/mailspool/config"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/suppress"
	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mailspool.toml")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestLoad(t *testing.T) {
	t.Setenv("MAILSPOOL_DATABASE", "")
	t.Setenv("MAILSPOOL_LANE_BULK_MAIL_TRANSPORT", "fake://?script=ok")
	path := writeConfig(t, `
database = "sqlite:file.db"

[lanes.tx]
transport = "fake://"
recipient_limit = "off"
retry_schedule = ["1m", "2d"]
keep_sent = "7d"
lease_margin = "15s"
fail_after = "2m"

[lanes.bulk-mail]
table = "mail_bulk"
transport = "smtp://example.com"
batch = 20
`)
	cfg, err := config.Load(path, "")
	require.NoError(t, err)
	assert.Equal(t, "sqlite:file.db", cfg.Database)
	require.Len(t, cfg.Lanes, 2)
	bulk, tx := cfg.Lanes[0], cfg.Lanes[1]
	assert.Equal(t, "bulk-mail", bulk.Lane.Name)
	assert.Equal(t, "mail_bulk", bulk.Lane.Table)
	assert.Equal(t, "fake://?script=ok", bulk.Transport, "the environment replaces the file's transport")
	assert.Equal(t, 20, bulk.Worker.Batch)
	assert.Equal(t, queue.DefaultTable, tx.Lane.Table)
	assert.Equal(t, queue.NoLimit, tx.Lane.RecipientLimit)
	assert.Equal(t, []time.Duration{time.Minute, 48 * time.Hour}, tx.Lane.Retry.Schedule)
	assert.Equal(t, 7*24*time.Hour, tx.Worker.Retention.Sent)
	assert.Equal(t, 15*time.Second, tx.Worker.LeaseMargin)
	assert.Equal(t, 2*time.Minute, tx.Worker.FailAfter)
	assert.Equal(t, []string{"mail_bulk", "mail_queue"}, config.Tables(cfg.Lanes))

	cfg, err = config.Load(path, "sqlite:other.db")
	require.NoError(t, err)
	assert.Equal(t, "sqlite:other.db", cfg.Database, "the database argument wins")

	one, err := cfg.Pick("tx")
	require.NoError(t, err)
	assert.Equal(t, "tx", one[0].Lane.Name)
	_, err = cfg.Pick("nope")
	assert.ErrorContains(t, err, `no lane "nope" (lanes: bulk-mail, tx)`)

	cfg, err = config.Load("", "")
	require.NoError(t, err)
	assert.Equal(t, config.DefaultDatabase, cfg.Database)
	require.Len(t, cfg.Lanes, 1)
	assert.Empty(t, cfg.Lanes[0].Transport, "no default transport")
}

// The queue's own limits are the config's: what New or NewWorker would
// refuse, Load refuses, naming the lane.
func TestLoadUsesTheQueuesValidation(t *testing.T) {
	cases := map[string]string{
		"batch = 501":            "config: lanes.tx: queue: worker batch 501 out of range 1..500",
		"max_attempts = 1001":    "config: lanes.tx: queue: lane tx: retry: max attempts 1001 out of range 1..1000",
		"table = \"bad name\"":   "config: lanes.tx: queue:",
		"concurrency = -1":       "config: lanes.tx: queue: worker concurrency -1 out of range 1..1000",
		"max_size = -5":          "config: lanes.tx: queue: lane tx: max size -5 out of range",
		"lease_margin = \"1ms\"": "config: lanes.tx: queue: lease margin 1ms is too short",
		// A zero is not "the default" when it is written.
		"batch = 0":             "lanes.tx.batch: 0 is not allowed",
		"concurrency = 0":       "lanes.tx.concurrency: 0 is not allowed",
		"max_attempts = 0":      "lanes.tx.max_attempts: 0 is not allowed",
		"max_size = 0":          "lanes.tx.max_size: 0 is not allowed",
		"breaker_threshold = 0": "lanes.tx.breaker_threshold: 0 is not allowed",
		// Upper bounds, in queue/bounds.go.
		"concurrency = 100000":             "worker concurrency 100000 out of range 1..1000",
		"max_size = 100000000":             "max size 100000000 out of range",
		"shutdown_timeout = \"60000d\"":    "shutdown timeout 1440000h0m0s is over its bound of 24h0m0s",
		"shutdown_timeout = \"25h\"":       "shutdown timeout 25h0m0s is over its bound",
		"send_timeout = \"2h\"":            "send timeout 2h0m0s is over its bound",
		"poll_interval = \"2h\"":           "poll interval",
		"lease_margin = \"25h\"":           "lease margin",
		"fail_after = \"31d\"":             "fail after",
		"cleanup_interval = \"31d\"":       "cleanup interval",
		"keep_sent = \"40000d\"":           "retention of sent mail",
		"retry_schedule = [\"366d\"]":      "schedule entry 8784h0m0s is over its bound",
		"connection_schedule = [\"366d\"]": "schedule entry",
		"recipient_limit = \"3/366d\"":     "Per must be at most",
		"lock_timeout = \"2h\"":            "lock timeout",
	}
	for line, want := range cases {
		_, err := config.Load(writeConfig(t, "[lanes.tx]\ntransport = \"fake://\"\n"+line+"\n"), "")
		assert.ErrorContains(t, err, want, line)
	}
}

// The first worker to stop stops the others.
func TestRunFirstWorkerToStopStopsTheRest(t *testing.T) {
	ctx := context.Background()
	path := writeConfig(t, `
[lanes.a]
transport = "fake://"
max_messages = 2
poll_interval = "20ms"
[lanes.b]
table = "mail_b"
transport = "fake://"
poll_interval = "20ms"
`)
	cfg, err := config.Load(path, "sqlite:"+filepath.Join(t.TempDir(), "q.db"))
	require.NoError(t, err)
	db, err := cfg.Open()
	require.NoError(t, err)
	defer db.Close()

	err = config.Run(ctx, db, cfg.Lanes, nil)
	assert.ErrorContains(t, err, "mail_queue", "no schema yet: the error names the table")

	require.NoError(t, queue.Migrate(ctx, db, config.Tables(cfg.Lanes)...))
	require.NoError(t, suppress.Migrate(ctx, db))
	q, err := queue.New(ctx, db, cfg.Lanes[0].Lane, nil)
	require.NoError(t, err)
	for _, to := range []string{"a@example.com", "b@example.com"} {
		_, err := q.Enqueue(ctx, db, &transport.Message{From: addr("shop@example.com"), To: addr(to), Subject: "s", Text: "t"})
		require.NoError(t, err)
	}
	// Lane a stops after 2 mails; lane b (no limit) must stop with it, or
	// Run never returns and the test times out.
	require.NoError(t, config.Run(ctx, db, cfg.Lanes, nil))
	sent, err := q.Count(ctx, queue.Filter{Status: "sent"})
	require.NoError(t, err)
	assert.EqualValues(t, 2, sent)
}

// A worker started against a database whose suppression table is missing
// (queue tables migrated by an older mailspool) refuses to start, saying
// to run migrate, instead of failing every claim for ever; nothing is
// claimed.
func TestRunRefusesWithoutSuppressionTable(t *testing.T) {
	ctx := context.Background()
	path := writeConfig(t, `
[lanes.a]
transport = "fake://"
max_messages = 1
poll_interval = "20ms"
`)
	cfg, err := config.Load(path, "sqlite:"+filepath.Join(t.TempDir(), "q.db"))
	require.NoError(t, err)
	db, err := cfg.Open()
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, queue.Migrate(ctx, db, config.Tables(cfg.Lanes)...))
	q, err := queue.New(ctx, db, cfg.Lanes[0].Lane, nil)
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, db, &transport.Message{From: addr("shop@example.com"), To: addr("a@example.com"), Subject: "s", Text: "t"})
	require.NoError(t, err)

	err = config.Run(ctx, db, cfg.Lanes, nil)
	require.Error(t, err, "Run must refuse to start")
	assert.ErrorContains(t, err, suppress.Table)
	assert.ErrorContains(t, err, "run 'mailspool migrate'")
	pending, err := q.Count(ctx, queue.Filter{Status: "pending"})
	require.NoError(t, err)
	assert.EqualValues(t, 1, pending, "nothing was claimed")

	require.NoError(t, suppress.Migrate(ctx, db))
	require.NoError(t, config.Run(ctx, db, cfg.Lanes, nil), "once migrated, it runs")
	sent, err := q.Count(ctx, queue.Filter{Status: "sent"})
	require.NoError(t, err)
	assert.EqualValues(t, 1, sent)
}

func addr(a string) mail.Address { return mail.Address{Address: a} }

func TestLoadRules(t *testing.T) {
	path := writeConfig(t, `
[lanes.tx]
transport = "fake://"

[[lanes.tx.rules]]
name        = "acme-quota"
code        = 552
enhanced    = "5.2.2"
text        = "quota.*tomorrow"
kind        = "temporary"
retry_after = "1d"

[[lanes.tx.rules]]
name  = "ses-param"
error = "InvalidParameterValue"
kind  = "connection"

[[lanes.tx.rules]]
name  = "acme-blocks-us"
code  = 550
text  = "acme policy"
kind  = "temporary"
scope = "sender"
`)
	cfg, err := config.Load(path, "")
	require.NoError(t, err)
	rules := cfg.Lanes[0].Rules
	require.Equal(t, 3, rules.Len())
	d0 := classify.Explain(rules.Apply(classify.SMTPReply("550 5.1.1 refused by acme policy")))
	assert.Equal(t, transport.Temporary, d0.Kind)
	assert.Equal(t, transport.ScopeSender, d0.Scope, "the rule sets the scope")
	assert.Equal(t, "operator:acme-blocks-us", d0.Rule)
	d := classify.Explain(rules.Apply(classify.SMTPReply("552 5.2.2 Mailbox quota exceeded, cleared tomorrow")))
	assert.Equal(t, transport.Temporary, d.Kind)
	assert.Equal(t, 24*time.Hour, d.RetryAfter)
	assert.Equal(t, "operator:acme-quota", d.Rule)

	// A lane without rules has none.
	cfg, err = config.Load("", "")
	require.NoError(t, err)
	assert.Equal(t, 0, cfg.Lanes[0].Rules.Len())

	// Invalid rules are errors naming the lane and the rule.
	for content, want := range map[string]string{
		"[[lanes.tx.rules]]\nname = \"mine\"\ncode = 550\nkind = \"sent\"\n":                                                                       `config: lanes.tx.rules: rule mine: kind "sent"`,
		"[[lanes.tx.rules]]\nname = \"re\"\ntext = \"(\"\nkind = \"permanent\"\n":                                                                  `config: lanes.tx.rules: rule re: text "("`,
		"[[lanes.tx.rules]]\nname = \"w\"\ncode = 421\nkind = \"temporary\"\nretry_after = \"soon\"\n":                                             "config: lanes.tx.rules: rule w: retry_after",
		"[[lanes.tx.rules]]\nname = \"any\"\nkind = \"permanent\"\n":                                                                               "config: lanes.tx.rules: rule any: no condition",
		"[[lanes.tx.rules]]\ncode = 550\nkind = \"permanent\"\n":                                                                                   "config: lanes.tx.rules: rule #1: name",
		"[[lanes.tx.rules]]\nname = \"a\"\ncode = 550\nkind = \"permanent\"\n[[lanes.tx.rules]]\nname = \"a\"\ncode = 551\nkind = \"permanent\"\n": "config: lanes.tx.rules: rule a: the name is used twice",
		"[[lanes.tx.rules]]\nname = \"s\"\ncode = 550\nkind = \"temporary\"\nscope = \"everyone\"\n":                                               `config: lanes.tx.rules: rule s: scope "everyone": want recipient, message, sender, transient or lane`,
		"[[lanes.tx.rules]]\nname = \"p\"\ncode = 550\nkind = \"permanent\"\nscope = \"sender\"\n":                                                 "config: lanes.tx.rules: rule p: scope sender: a permanent rule needs recipient or message scope",
		"[[lanes.tx.rules]]\nnmae = \"typo\"\n":                                                                                                    "unknown key lanes.tx.rules.nmae",
	} {
		_, err := config.Load(writeConfig(t, "[lanes.tx]\ntransport = \"fake://\"\n"+content), "")
		require.Error(t, err, content)
		assert.Contains(t, err.Error(), want, content)
	}
}

// TestNoDefaultTransport: without a config file the lane has no transport
// (the fake used to be the silent default), and a worker refuses to start,
// saying how to configure one, before it claims anything.
func TestNoDefaultTransport(t *testing.T) {
	t.Setenv("MAILSPOOL_LANE_DEFAULT_TRANSPORT", "")
	cfg, err := config.Load("", "")
	require.NoError(t, err)
	err = cfg.Lanes[0].CheckTransport()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lane default has no transport")
	assert.Contains(t, err.Error(), "MAILSPOOL_LANE_DEFAULT_TRANSPORT")
	err = config.Run(context.Background(), nil, cfg.Lanes, nil)
	assert.ErrorContains(t, err, "has no transport")

	t.Setenv("MAILSPOOL_LANE_DEFAULT_TRANSPORT", "smtp://relay.example.com:25?tls=none")
	cfg, err = config.Load("", "")
	require.NoError(t, err)
	assert.Equal(t, "smtp://relay.example.com:25?tls=none", cfg.Lanes[0].Transport)
	assert.NoError(t, cfg.Lanes[0].CheckTransport())
}

// TestLaneTablesNeverCollide: tables are one table when their names differ
// only in case (SQLite), and a lane's table may not be another lane's
// rate-limit table, table of mail bodies, or mailspool's own table.
func TestLaneTablesNeverCollide(t *testing.T) {
	for body, want := range map[string]string{
		"[lanes.a]\ntransport = \"fake://\"\ntable = \"t_a\"\n[lanes.b]\ntransport = \"fake://\"\ntable = \"T_A\"\n":          `"T_A" is the same table as lane a's table "t_a"`,
		"[lanes.a]\ntransport = \"fake://\"\ntable = \"mail\"\n[lanes.b]\ntransport = \"fake://\"\ntable = \"mail_limits\"\n": "reserved for the rate-limit table",
		"[lanes.a]\ntransport = \"fake://\"\ntable = \"mail\"\n[lanes.b]\ntransport = \"fake://\"\ntable = \"MAIL_Limits\"\n": "reserved for the rate-limit table",
		"[lanes.a]\ntransport = \"fake://\"\ntable = \"mail\"\n[lanes.b]\ntransport = \"fake://\"\ntable = \"Mail_Bodies\"\n": "reserved for the table of mail bodies",
		"[lanes.a]\ntransport = \"fake://\"\ntable = \"mailspool_schema\"\n":                                                  "mailspool's own tables",
		"[lanes.a]\ntransport = \"fake://\"\ntable = \"Mailspool_Lanes\"\n":                                                   "mailspool's own tables",
		"[lanes.a-b]\ntransport = \"fake://\"\ntable = \"t1\"\n[lanes.a_b]\ntransport = \"fake://\"\ntable = \"t2\"\n":        "MAILSPOOL_LANE_A_B_TRANSPORT",
	} {
		_, err := config.Load(writeConfig(t, body), "")
		require.Error(t, err, body)
		assert.Contains(t, err.Error(), want, body)
	}
}

// TestDayDurationsThatOverflow: a day count too large for a duration is an
// error naming the key, never a wrapped-around value.
func TestDayDurationsThatOverflow(t *testing.T) {
	for line, want := range map[string]string{
		`keep_sent = "213504d"`:              "lanes.tx.keep_sent",
		`retry_schedule = ["2m", "213504d"]`: "lanes.tx.retry_schedule",
		`recipient_limit = "3/213504d"`:      "lanes.tx.recipient_limit",
		`send_timeout = "9999999999h"`:       "lanes.tx.send_timeout",
	} {
		_, err := config.Load(writeConfig(t, "[lanes.tx]\ntransport = \"fake://\"\n"+line+"\n"), "")
		require.Error(t, err, line)
		assert.Contains(t, err.Error(), want, line)
		assert.Contains(t, err.Error(), "too long", line)
	}
}

// A TOML syntax error quotes the text it stopped at; in a line that holds
// a secret that would show it. The error keeps the line and the key only.
func TestTOMLErrorsHideTheText(t *testing.T) {
	for _, content := range []string{
		"[lanes.tx]\ntransport = \"smtp://u:s3cret\\uZZZZ@smtp.example.com\"\n",
		"[lanes.tx]\ntransport = smtp://u:s3cret@smtp.example.com\n",
		"database = \"mysql://u:s3cret@h/db\n[lanes.tx]\n",
		"database = 'mysql://u:s3cret@h/db\n",
		"[lanes.tx]\ntransport = \"smtp://u:s3cret@h\"\nbatch = \"s3cret\"\n",
		"[lanes.tx]\ntransport = \"smtp://u:s3cret@h\" s3cret\n",
	} {
		_, err := config.Load(writeConfig(t, content), "")
		require.Error(t, err, content)
		assert.NotContains(t, err.Error(), "s3cret", content)
		assert.Contains(t, err.Error(), "line ", content)
	}
	_, err := config.Load(writeConfig(t, "[lanes.tx]\ntransport = \"fake://\"\nbatch = \"x\"\n"), "")
	assert.ErrorContains(t, err, `(last key "lanes.tx.batch")`, "the key is still named")
}

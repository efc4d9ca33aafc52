package config_test

import (
	"context"
	"net/mail"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mailspool/mailspool/config"
	"github.com/mailspool/mailspool/queue"
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
	assert.Equal(t, config.DefaultTransport, cfg.Lanes[0].Transport)
}

// The queue's own limits are the config's: what New or NewWorker would
// refuse, Load refuses, naming the lane.
func TestLoadUsesTheQueuesValidation(t *testing.T) {
	cases := map[string]string{
		"batch = 501":          "config: lanes.tx: queue: worker batch 501 out of range 1..500",
		"max_attempts = 1001":  "config: lanes.tx: queue: lane tx: retry: max attempts 1001 out of range 1..1000",
		"table = \"bad name\"": "config: lanes.tx: queue:",
		"concurrency = -1":     "config: lanes.tx: queue: worker concurrency -1 below 1",
		"max_size = -5":        "config: lanes.tx: queue: lane tx: negative max size -5",
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
	q, err := queue.New(ctx, db, cfg.Lanes[0].Lane, nil)
	require.NoError(t, err)
	for _, to := range []string{"a@example.com", "b@example.com"} {
		_, err := q.Enqueue(ctx, db, &transport.Message{From: addr("shop@example.com"), To: addr(to), Subject: "s", Text: "t"})
		require.NoError(t, err)
	}
	// Lane a stops after 2 mails; lane b (no limit) must stop with it, or
	// Run never returns and the test times out.
	require.NoError(t, config.Run(ctx, db, cfg.Lanes, nil))
	counts, err := q.CountByStatus(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(2), counts["sent"])
}

func addr(a string) mail.Address { return mail.Address{Address: a} }

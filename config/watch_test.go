package config_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mailspool/mailspool/admin/statuspage"
	"github.com/mailspool/mailspool/alert"
	"github.com/mailspool/mailspool/config"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/suppress"
	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadAdminAndAlertKeys(t *testing.T) {
	t.Setenv(config.AlertWebhookEnv, "")
	cfg, err := config.Load(writeConfig(t, `
admin_listen = "127.0.0.1:9465"
[alerts]
webhook = "https://hooks.example.com/services/T0K3N"
format = "slack"
interval = "30s"
[lanes.tx]
transport = "fake://"
[lanes.tx.alerts]
backlog = 1000
failure_rate = 0.2
[lanes.bulk]
table = "mail_bulk"
transport = "fake://"
`), "")
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:9465", cfg.AdminListen)
	assert.Equal(t, &config.Alerts{WebhookURL: "https://hooks.example.com/services/T0K3N", Slack: true, Interval: 30 * time.Second}, cfg.Alerts)
	bulk, tx := cfg.Lanes[0], cfg.Lanes[1]
	assert.Equal(t, alert.Thresholds{Backlog: 1000, FailureRate: 0.2, MinAttempts: 20, Restarts: 3}, tx.Alerts)
	assert.Equal(t, alert.Thresholds{}, bulk.Alerts, "the defaults are alert's")

	t.Setenv(config.AlertWebhookEnv, "https://hooks.example.com/from-env")
	cfg, err = config.Load(writeConfig(t, "[lanes.tx]\ntransport = \"fake://\"\n"), "")
	require.NoError(t, err)
	assert.Equal(t, "https://hooks.example.com/from-env", cfg.Alerts.WebhookURL, "the environment alone turns alerts on")
	assert.Empty(t, cfg.AdminListen, "off unless configured")
	t.Setenv(config.AlertWebhookEnv, "")

	cases := map[string]string{
		"admin_listen = \"9465\"\n[lanes.tx]\ntransport = \"fake://\"":                                              `config: admin_listen: "9465" is not host:port`,
		"[alerts]\nformat = \"json\"\n[lanes.tx]\ntransport = \"fake://\"":                                          "config: alerts.webhook: missing (an http(s) URL, or set MAILSPOOL_ALERT_WEBHOOK)",
		"[alerts]\nwebhook = \"ftp://h/T0K3N\"\n[lanes.tx]\ntransport = \"fake://\"":                                "config: alerts.webhook: alert: the webhook URL must be an http:// or https:// URL",
		"[alerts]\nwebhook = \"https://h/x\"\nformat = \"xml\"\n[lanes.tx]\ntransport = \"fake://\"":                `config: alerts.format: "xml" is not json or slack`,
		"[lanes.tx]\ntransport = \"fake://\"\n[lanes.tx.alerts]\nbacklog = 5":                                       "config: lanes.tx.alerts: thresholds, but no [alerts] section",
		"[alerts]\nwebhook = \"https://h/x\"\n[lanes.tx]\ntransport = \"fake://\"\n[lanes.tx.alerts]\nbacklog = -1": "config: lanes.tx.alerts: negative backlog threshold -1",
		"[alerts]\nwebhook = \"https://h/x\"\n[lanes.tx]\ntransport = \"fake://\"\n[lanes.tx.alerts]\nbaklog = 1":   "unknown key lanes.tx.alerts.baklog",
	}
	// NaN compares false with everything: it must not pass as a threshold.
	lane := "[alerts]\nwebhook = \"https://h/x\"\n[lanes.tx]\ntransport = \"fake://\"\n[lanes.tx.alerts]\n"
	for _, v := range []string{"nan", "+nan", "inf", "-inf", "-0.1", "1.5"} {
		cases[lane+"failure_rate = "+v] = "config: lanes.tx.alerts: failure rate threshold"
	}
	cases[lane+"restarts = -1"] = "config: lanes.tx.alerts: negative restarts threshold -1"
	cases[lane+"min_attempts = -1"] = "config: lanes.tx.alerts: negative minimum attempts -1"
	cases["[alerts]\nwebhook = \"https://h/x\"\ninterval = \"2d\"\n[lanes.tx]\ntransport = \"fake://\""] = "config: alerts.interval"
	for content, want := range cases {
		_, err := config.Load(writeConfig(t, content), "")
		require.Error(t, err, content)
		assert.Contains(t, err.Error(), want, content)
		assert.NotContains(t, err.Error(), "T0K3N")
	}
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func TestRunServesMetricsAndHealth(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	listen := freeAddr(t)
	path := writeConfig(t, `
admin_listen = "`+listen+`"
[lanes.tx]
transport = "fake://"
poll_interval = "20ms"
`)
	cfg, err := config.Load(path, "sqlite:"+filepath.Join(t.TempDir(), "q.db"))
	require.NoError(t, err)
	db, err := cfg.Open()
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, queue.Migrate(ctx, db, config.Tables(cfg.Lanes)...))
	require.NoError(t, suppress.Migrate(ctx, db))
	q, err := queue.New(ctx, db, cfg.Lanes[0].Lane, nil)
	require.NoError(t, err)
	for _, to := range []string{"a@example.com", "b@example.com"} {
		_, err := q.Enqueue(ctx, db, &transport.Message{From: addr("shop@example.com"), To: addr(to), Subject: "s", Text: "t"})
		require.NoError(t, err)
	}

	// systemd's notify socket, to see READY and STOPPING.
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(t.TempDir(), "notify"), Net: "unixgram"})
	require.NoError(t, err)
	defer sock.Close()
	t.Setenv("NOTIFY_SOCKET", sock.LocalAddr().String())
	notified := func() string {
		buf := make([]byte, 512)
		require.NoError(t, sock.SetReadDeadline(time.Now().Add(10*time.Second)))
		n, err := sock.Read(buf)
		require.NoError(t, err)
		return string(buf[:n])
	}

	done := make(chan error, 1)
	go func() { done <- config.Run(ctx, db, cfg.Lanes, &config.RunOptions{AdminListen: cfg.AdminListen}) }()
	assert.Equal(t, "READY=1", notified())
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + listen + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	require.Eventually(t, func() bool {
		code, body := get("/metrics")
		return code == http.StatusOK && strings.Contains(body, `mailspool_outcomes_total{lane="tx",status="sent"} 2`)
	}, 30*time.Second, 20*time.Millisecond, "the worker's sends show in /metrics")
	code, body := get("/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `mailspool_queue_rows{lane="tx",status="pending"} 0`)
	assert.Contains(t, body, `mailspool_sends_total{kind="sent",lane="tx",transport="fake"} 2`)
	assert.Contains(t, body, "go_goroutines")
	code, body = get("/healthz")
	assert.Equal(t, http.StatusOK, code, body)
	code, body = get("/")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "lane tx", "the status page is at /")
	code, _ = get("/nowhere")
	assert.Equal(t, http.StatusNotFound, code)

	// The address is taken while Run serves: a second Run says so.
	err = config.Run(ctx, db, cfg.Lanes, &config.RunOptions{AdminListen: cfg.AdminListen})
	assert.ErrorContains(t, err, "config: admin_listen: admin: listen on "+listen)

	cancel()
	require.NoError(t, <-done)
	assert.Equal(t, "STOPPING=1", notified())
	code, _ = get("/healthz")
	assert.Zero(t, code, "the listener stops with Run")
}

func TestLoadStatusPage(t *testing.T) {
	path := writeConfig(t, `
admin_listen = "127.0.0.1:9465"
[status_page]
actions = true
show_addresses = true
user = "ops"
password = "from-file"
[lanes.tx]
transport = "fake://"
`)
	cfg, err := config.Load(path, "")
	require.NoError(t, err)
	assert.True(t, cfg.StatusPage.Actions)
	assert.True(t, cfg.StatusPage.ShowAddresses)
	assert.Equal(t, statuspage.Credentials{User: "ops", Password: "from-file"}, cfg.StatusPage.Credentials)

	t.Setenv(config.StatusPasswordEnv, "from-env")
	t.Setenv(config.StatusTokenEnv, "tok")
	cfg, err = config.Load(path, "")
	require.NoError(t, err)
	assert.Equal(t, statuspage.Credentials{User: "ops", Password: "from-env", Token: "tok"}, cfg.StatusPage.Credentials)

	_, err = config.Load(writeConfig(t, "[lanes.tx]\ntransport = \"fake://\""), "")
	assert.ErrorContains(t, err, "config: status_page: statuspage: basic credentials need both a user and a password")
	assert.NotContains(t, err.Error(), "from-env")

	t.Setenv(config.StatusPasswordEnv, "")
	t.Setenv(config.StatusTokenEnv, "")
	cfg, err = config.Load(writeConfig(t, "[lanes.tx]\ntransport = \"fake://\""), "")
	require.NoError(t, err)
	assert.Equal(t, statuspage.Options{}, cfg.StatusPage, "read-only, masked, no credentials by default")

	_, err = config.Load(writeConfig(t, "[status_page]\nactoins = true\n[lanes.tx]\ntransport = \"fake://\""), "")
	assert.ErrorContains(t, err, "unknown key status_page.actoins")
}

func TestRunRefusesAnOpenStatusPage(t *testing.T) {
	ctx := context.Background()
	cfg, err := config.Load(writeConfig(t, "admin_listen = \"0.0.0.0:0\"\n[lanes.tx]\ntransport = \"fake://\""), "sqlite:"+filepath.Join(t.TempDir(), "q.db"))
	require.NoError(t, err, "loading the config is fine: only a worker serves the page")
	db, err := cfg.Open()
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, queue.Migrate(ctx, db, config.Tables(cfg.Lanes)...))
	require.NoError(t, suppress.Migrate(ctx, db))
	err = config.Run(ctx, db, cfg.Lanes, &config.RunOptions{AdminListen: cfg.AdminListen, StatusPage: cfg.StatusPage})
	assert.ErrorContains(t, err, "config: admin_listen: statuspage: 0.0.0.0:0 is not a loopback address: the status page needs credentials there")
}

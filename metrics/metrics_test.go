package metrics_test

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mailspool/mailspool/admin"
	"github.com/mailspool/mailspool/metrics"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/throttle"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/composite"
	"github.com/mailspool/mailspool/transport/fake"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openQueue returns a migrated SQLite queue of the named lane.
func openQueue(t *testing.T, lane string) (*queue.Queue, *sql.DB) {
	t.Helper()
	ctx := context.Background()
	db, err := dburl.Open("sqlite:" + filepath.Join(t.TempDir(), "q.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	require.NoError(t, queue.Migrate(ctx, db, "mail_"+lane))
	q, err := queue.New(ctx, db, queue.Lane{Name: lane, Table: "mail_" + lane, RecipientLimit: queue.NoLimit}, nil)
	require.NoError(t, err)
	return q, db
}

func enqueue(t *testing.T, q *queue.Queue, db *sql.DB, to string) int64 {
	t.Helper()
	tx, err := db.Begin()
	require.NoError(t, err)
	id, err := q.Enqueue(context.Background(), tx, &transport.Message{
		From: mail.Address{Address: "noreply@shop.example"}, To: mail.Address{Address: to}, Subject: "s", Text: "t",
	})
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	return id
}

// scrape fetches /metrics from the admin handler and parses it with the
// Prometheus text parser.
func scrape(t *testing.T, h http.Handler) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var body strings.Builder
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(teeReader{resp.Body, &body})
	require.NoError(t, err, "/metrics must parse as the Prometheus text format")
	return families, body.String()
}

type teeReader struct {
	r interface{ Read([]byte) (int, error) }
	w *strings.Builder
}

func (t teeReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.w.Write(p[:n])
	return n, err
}

// documented returns the metric names in the table of docs/MONITORING.md.
func documented(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("../docs/MONITORING.md")
	require.NoError(t, err)
	var names []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(mailspool_[a-z_]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		names = append(names, m[1])
	}
	require.NotEmpty(t, names)
	return names
}

// value returns the value of the family's series whose labels include want.
func value(t *testing.T, f *dto.MetricFamily, want map[string]string) float64 {
	t.Helper()
	require.NotNil(t, f)
next:
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	t.Fatalf("%s has no series with labels %v", f.GetName(), want)
	return 0
}

func TestMetricsParseAndMatchTheDocumentedNames(t *testing.T) {
	q, db := openQueue(t, "transactional")
	enqueue(t, q, db, "ann@customer.example")
	enqueue(t, q, db, "bob@customer.example")

	reg := prometheus.NewRegistry()
	m := metrics.New(nil)
	reg.MustRegister(m)
	obs, err := m.Lane(q, "smtp://apikey:s3cret@smtp.provider.example:587?tls=starttls")
	require.NoError(t, err)
	_, err = m.Lane(q, "smtp://other")
	assert.ErrorContains(t, err, "lane transactional added twice")

	lane := "transactional"
	obs.ClaimFunc(queue.ClaimEvent{Lane: lane, Rows: 3})
	obs.ClaimFunc(queue.ClaimEvent{Lane: lane})
	obs.OutcomeFunc(queue.OutcomeEvent{Lane: lane, ID: 1, Status: queue.StatusSent, Kind: "sent", Sent: true,
		SendDuration: 40 * time.Millisecond, Enqueued: time.Now().Add(-90 * time.Second), Domain: "customer.example"})
	obs.OutcomeFunc(queue.OutcomeEvent{Lane: lane, ID: 2, Status: queue.StatusFailed, Kind: "permanent", Sent: true,
		Code: 550, Enhanced: "5.1.1", Scope: "recipient", Rule: "smtp-recipient", Domain: "customer.example"})
	obs.OutcomeFunc(queue.OutcomeEvent{Lane: lane, ID: 4, Status: queue.StatusRetry, Kind: "temporary", Sent: true,
		Code: 554, Enhanced: "5.7.1", Scope: "sender", Rule: "smtp-sender-policy", Domain: "customer.example"})
	obs.OutcomeFunc(queue.OutcomeEvent{Lane: lane, ID: 3, Status: queue.StatusFailed, Kind: "expired"})
	obs.RescueFunc(queue.RescueEvent{Lane: lane, Rows: 2})
	obs.FencedFunc(queue.FencedEvent{Lane: lane, Rows: 1})
	obs.DeadlockFunc(queue.DeadlockEvent{Lane: lane, Op: "claim"})
	obs.CleanupFunc(queue.CleanupEvent{Lane: lane, Deleted: 500})
	obs.BreakerFunc(queue.BreakerEvent{Lane: lane, Open: true, Until: time.Now().Add(time.Minute)})

	sp, err := composite.Parse("failover(fake://a, fake://b)")
	require.NoError(t, err)
	ct, err := composite.New(sp, []transport.Transport{fake.New(nil), fake.New(nil)}, composite.Options{})
	require.NoError(t, err)
	defer ct.Close()
	_, err = ct.Send(context.Background(), &transport.Message{From: mail.Address{Address: "a@shop.example"}, To: mail.Address{Address: "b@example.com"}, Subject: "s", Text: "t"})
	require.NoError(t, err)
	reg.MustRegister(metrics.NewMembers(lane, ct))

	require.NoError(t, throttle.Migrate(context.Background(), db))
	st, err := throttle.Open(db)
	require.NoError(t, err)
	require.NoError(t, st.Acquire(context.Background(), "w.1", 1, time.Minute, []throttle.Limit{{Key: "domain:gmail", Concurrency: 3}}))
	tm, err := metrics.NewThrottle(db)
	require.NoError(t, err)
	reg.MustRegister(tm)
	tm.OnSlow(throttle.SlowEvent{Lane: lane, Key: "domain:gmail", Rule: "gmail-4.7.28", Factor: 0.5})

	families, body := scrape(t, admin.Handler(reg, admin.NewHealth(db, nil)))
	assert.Equal(t, 1.0, value(t, families["mailspool_throttle_in_flight"], map[string]string{"key": "domain:gmail"}))
	assert.Equal(t, 1.0, value(t, families["mailspool_throttle_slowdowns_total"], map[string]string{"key": "domain:gmail", "rule": "gmail-4.7.28"}))
	names := documented(t)
	for _, name := range names {
		assert.Contains(t, families, name, "documented in docs/MONITORING.md but not exposed")
	}
	for name := range families {
		if strings.HasPrefix(name, "mailspool_") {
			assert.Contains(t, names, name, "exposed but not documented in docs/MONITORING.md")
		}
	}
	for name, f := range families {
		assert.Regexp(t, `^[a-z_]+$`, name)
		if f.GetType() == dto.MetricType_COUNTER {
			assert.True(t, strings.HasSuffix(name, "_total"), "counter %s ends in _total", name)
		}
	}

	l := map[string]string{"lane": lane}
	with := func(k, v string) map[string]string { return map[string]string{"lane": lane, k: v} }
	assert.Equal(t, 1.0, value(t, families["mailspool_sends_total"], map[string]string{"lane": lane, "transport": "smtp", "kind": "sent"}))
	assert.Equal(t, 1.0, value(t, families["mailspool_sends_total"], with("kind", "permanent")))
	assert.Equal(t, 0.0, value(t, families["mailspool_sends_total"], with("kind", "connection")), "series exist before their first event")
	assert.Equal(t, 3.0, value(t, families["mailspool_send_duration_seconds"], l), "expired rows were not sent")
	assert.Equal(t, 1.0, value(t, families["mailspool_failures_total"], map[string]string{"lane": lane, "kind": "permanent", "scope": "recipient", "rule": "smtp-recipient"}))
	assert.Equal(t, 1.0, value(t, families["mailspool_failures_total"], map[string]string{"lane": lane, "kind": "temporary", "scope": "sender", "rule": "smtp-sender-policy"}),
		"a retried 5xx is counted by its rule: the operator's count of burned retries")
	assert.Equal(t, 1.0, value(t, families["mailspool_delivery_latency_seconds"], l))
	assert.Equal(t, 2.0, value(t, families["mailspool_outcomes_total"], with("status", "failed")))
	assert.Equal(t, 2.0, value(t, families["mailspool_claims_total"], l))
	assert.Equal(t, 3.0, value(t, families["mailspool_claimed_rows_total"], l))
	assert.Equal(t, 2.0, value(t, families["mailspool_rescued_rows_total"], l))
	assert.Equal(t, 1.0, value(t, families["mailspool_fenced_out_total"], l))
	assert.Equal(t, 1.0, value(t, families["mailspool_deadlocks_total"], l))
	assert.Equal(t, 500.0, value(t, families["mailspool_cleanup_deleted_rows_total"], l))
	assert.Equal(t, 1.0, value(t, families["mailspool_breaker_open"], l))
	assert.Equal(t, 2.0, value(t, families["mailspool_queue_rows"], with("status", "pending")), "read from the table on scrape")
	assert.Equal(t, 0.0, value(t, families["mailspool_queue_rows"], with("status", "sending")))
	assert.Equal(t, 1.0, value(t, families["mailspool_stats_up"], l))
	assert.GreaterOrEqual(t, value(t, families["mailspool_oldest_pending_age_seconds"], l), 0.0)

	for _, secret := range []string{"s3cret", "apikey", "smtp.provider.example", "@", "customer.example"} {
		assert.NotContains(t, body, secret, "no credential, host or address in /metrics")
	}
}

func TestStatsDownWhenTheDatabaseIsGone(t *testing.T) {
	q, db := openQueue(t, "bulk")
	reg := prometheus.NewRegistry()
	m := metrics.New(&metrics.Options{StatsTimeout: time.Second})
	reg.MustRegister(m)
	_, err := m.Lane(q, "ses://default?region=eu-west-1")
	require.NoError(t, err)
	require.NoError(t, db.Close())
	families, _ := scrape(t, admin.Handler(reg, admin.NewHealth(db, nil)))
	assert.Equal(t, 0.0, value(t, families["mailspool_stats_up"], map[string]string{"lane": "bulk"}))
	assert.NotContains(t, families, "mailspool_queue_rows", "no made-up row counts")
	assert.Equal(t, 0.0, value(t, families["mailspool_sends_total"], map[string]string{"transport": "ses", "kind": "sent"}))
}

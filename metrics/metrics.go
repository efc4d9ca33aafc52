package metrics

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/transport"
	"github.com/prometheus/client_golang/prometheus"
)

// Options configure Metrics. Zero fields take the defaults shown.
type Options struct {
	// StatsTimeout bounds the database queries of one scrape, per lane
	// (default 5s).
	StatsTimeout time.Duration
}

// Metrics turns the events of a queue.Observer into Prometheus metrics and
// reads each lane's table on scrape. It is a prometheus.Collector: register
// it once, then call Lane for every worker. It is safe for concurrent use.
type Metrics struct {
	opts Options

	sends        *prometheus.CounterVec
	sendDuration *prometheus.HistogramVec
	latency      *prometheus.HistogramVec
	failures     *prometheus.CounterVec
	outcomes     *prometheus.CounterVec
	claims       *prometheus.CounterVec
	claimErrors  *prometheus.CounterVec
	claimed      *prometheus.CounterVec
	rescued      *prometheus.CounterVec
	fenced       *prometheus.CounterVec
	deadlocks    *prometheus.CounterVec
	cleanupRows  *prometheus.CounterVec
	breakerOpen  *prometheus.GaugeVec
	lanePaused   *prometheus.GaugeVec

	rowsDesc, finishedDesc, oldestDesc, stuckDesc, upDesc *prometheus.Desc

	mu     sync.Mutex
	queues map[string]*queue.Queue // by lane name
}

// LatencyBuckets are the buckets of mailspool_delivery_latency_seconds, in
// seconds: from a second up to a week, since a mail may wait out an outage
// or a retry schedule of days.
var LatencyBuckets = []float64{1, 5, 15, 30, 60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400, 4 * 86400, 7 * 86400}

// New returns Metrics with no lanes yet. nil opts means defaults.
func New(opts *Options) *Metrics {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.StatsTimeout <= 0 {
		o.StatsTimeout = 5 * time.Second
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mailspool_" + name, Help: help}, labels)
	}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("mailspool_"+name, help, labels, nil)
	}
	return &Metrics{
		opts:  o,
		sends: counter("sends_total", "Delivery attempts by lane, transport URL scheme and outcome kind (sent, temporary, permanent, connection).", "lane", "transport", "kind"),
		sendDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "mailspool_send_duration_seconds", Help: "Time one delivery attempt took, whatever its outcome.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"lane", "transport"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "mailspool_delivery_latency_seconds", Help: "Time from enqueue to the provider's acceptance, for sent mail.",
			Buckets: LatencyBuckets,
		}, []string{"lane"}),
		failures:    counter("failures_total", "Failed delivery attempts by lane, outcome kind, scope (recipient, message, sender, transient, lane) and the classification rule that decided them.", "lane", "kind", "scope", "rule"),
		outcomes:    counter("outcomes_total", "Rows whose next state the worker decided, by that state (sent, retry, failed).", "lane", "status"),
		claims:      counter("claims_total", "Turns of the claim loop, including those that found nothing due.", "lane"),
		claimErrors: counter("claim_errors_total", "Claims that failed with a database error.", "lane"),
		claimed:     counter("claimed_rows_total", "Rows claimed for sending.", "lane"),
		rescued:     counter("rescued_rows_total", "Rows made claimable again after their lease expired (a worker died or hung).", "lane"),
		fenced:      counter("fenced_out_total", "Outcomes not written because another worker had taken the lease over.", "lane"),
		deadlocks:   counter("deadlocks_total", "Deadlocks and lock wait timeouts reported by the database and retried.", "lane"),
		cleanupRows: counter("cleanup_deleted_rows_total", "Finished rows deleted by the timed cleanup.", "lane"),
		breakerOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mailspool_breaker_open", Help: "1 while the lane's claiming is paused after connection failures in a row, else 0.",
		}, []string{"lane"}),
		lanePaused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mailspool_lane_paused", Help: "1 while an operator has paused the lane (mailspool pause), as this worker last read it, else 0.",
		}, []string{"lane"}),
		rowsDesc:     desc("queue_rows", "Unfinished rows by status (pending, retry, sending), read on scrape.", "lane", "status"),
		finishedDesc: desc("finished_last_hour_rows", "Rows that finished in the last hour by status (sent, failed), read on scrape.", "lane", "status"),
		oldestDesc:   desc("oldest_pending_age_seconds", "How long the most overdue pending or retry row has been due without being claimed, read on scrape.", "lane"),
		stuckDesc:    desc("stuck_rows", "Rows in sending whose lease ended more than 5 minutes ago, read on scrape.", "lane"),
		upDesc:       desc("stats_up", "1 when the scrape's queries of the lane's table succeeded, else 0.", "lane"),
		queues:       map[string]*queue.Queue{},
	}
}

// Lane adds q's lane to the metrics and returns the Observer to set in the
// lane worker's WorkerOptions. transportURL is the lane's transport URL:
// only its scheme ("smtp", "ses", ...) becomes a label, never a host or a
// credential. Each lane may be added once.
func (m *Metrics) Lane(q *queue.Queue, transportURL string) (*queue.Observer, error) {
	lane := q.Lane().Name
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.queues[lane]; dup {
		return nil, fmt.Errorf("metrics: lane %s added twice", lane)
	}
	m.queues[lane] = q
	scheme := schemeOf(transportURL)

	// Every series exists from the start, so that rate() and absent() work
	// before the first event.
	for _, k := range []transport.Kind{transport.Sent, transport.Temporary, transport.Permanent, transport.Connection} {
		m.sends.WithLabelValues(lane, scheme, k.String())
	}
	m.sendDuration.WithLabelValues(lane, scheme)
	m.latency.WithLabelValues(lane)
	for _, s := range []int{queue.StatusSent, queue.StatusRetry, queue.StatusFailed} {
		m.outcomes.WithLabelValues(lane, queue.StatusName(s))
	}
	for _, c := range []*prometheus.CounterVec{m.claims, m.claimErrors, m.claimed, m.rescued, m.fenced, m.deadlocks, m.cleanupRows} {
		c.WithLabelValues(lane)
	}
	m.breakerOpen.WithLabelValues(lane).Set(0)
	m.lanePaused.WithLabelValues(lane).Set(0)

	return &queue.Observer{
		ClaimFunc: func(e queue.ClaimEvent) {
			m.claims.WithLabelValues(e.Lane).Inc()
			if e.Err != nil {
				m.claimErrors.WithLabelValues(e.Lane).Inc()
			}
			m.claimed.WithLabelValues(e.Lane).Add(float64(e.Rows))
		},
		PauseFunc: func(e queue.PauseEvent) {
			paused := 0.0
			if e.Paused {
				paused = 1
			}
			m.lanePaused.WithLabelValues(e.Lane).Set(paused)
		},
		OutcomeFunc: func(e queue.OutcomeEvent) {
			m.outcomes.WithLabelValues(e.Lane, queue.StatusName(e.Status)).Inc()
			if !e.Sent {
				return
			}
			m.sends.WithLabelValues(e.Lane, scheme, e.Kind).Inc()
			if e.Status != queue.StatusSent {
				m.failures.WithLabelValues(e.Lane, e.Kind, e.Scope, e.Rule).Inc()
			}
			m.sendDuration.WithLabelValues(e.Lane, scheme).Observe(e.SendDuration.Seconds())
			if e.Status == queue.StatusSent && !e.Enqueued.IsZero() {
				m.latency.WithLabelValues(e.Lane).Observe(max(time.Since(e.Enqueued).Seconds(), 0))
			}
		},
		RescueFunc:   func(e queue.RescueEvent) { m.rescued.WithLabelValues(e.Lane).Add(float64(e.Rows)) },
		FencedFunc:   func(e queue.FencedEvent) { m.fenced.WithLabelValues(e.Lane).Add(float64(e.Rows)) },
		DeadlockFunc: func(e queue.DeadlockEvent) { m.deadlocks.WithLabelValues(e.Lane).Inc() },
		BreakerFunc: func(e queue.BreakerEvent) {
			v := 0.0
			if e.Open {
				v = 1
			}
			m.breakerOpen.WithLabelValues(e.Lane).Set(v)
		},
		CleanupFunc: func(e queue.CleanupEvent) { m.cleanupRows.WithLabelValues(e.Lane).Add(float64(e.Deleted)) },
	}, nil
}

// schemeOf returns the lower-case scheme of a transport URL, "unknown" when
// it has none.
func schemeOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" {
		return "unknown"
	}
	return strings.ToLower(u.Scheme)
}

func (m *Metrics) vectors() []prometheus.Collector {
	return []prometheus.Collector{m.sends, m.failures, m.sendDuration, m.latency, m.outcomes, m.claims, m.claimErrors, m.claimed,
		m.rescued, m.fenced, m.deadlocks, m.cleanupRows, m.breakerOpen, m.lanePaused}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.vectors() {
		c.Describe(ch)
	}
	for _, d := range []*prometheus.Desc{m.rowsDesc, m.finishedDesc, m.oldestDesc, m.stuckDesc, m.upDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the event counters, and each
// lane's queue.Stats read now, each query bounded by StatsTimeout.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.vectors() {
		c.Collect(ch)
	}
	m.mu.Lock()
	queues := make(map[string]*queue.Queue, len(m.queues))
	for k, v := range m.queues {
		queues[k] = v
	}
	m.mu.Unlock()
	for lane, q := range queues {
		ctx, cancel := context.WithTimeout(context.Background(), m.opts.StatsTimeout)
		s, err := q.Stats(ctx)
		cancel()
		if err != nil {
			ch <- prometheus.MustNewConstMetric(m.upDesc, prometheus.GaugeValue, 0, lane)
			continue
		}
		gauge := func(d *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{lane}, labels...)...)
		}
		gauge(m.upDesc, 1)
		gauge(m.rowsDesc, float64(s.Pending), "pending")
		gauge(m.rowsDesc, float64(s.Retry), "retry")
		gauge(m.rowsDesc, float64(s.Sending), "sending")
		gauge(m.finishedDesc, float64(s.SentLastHour), "sent")
		gauge(m.finishedDesc, float64(s.FailedLastHour), "failed")
		gauge(m.oldestDesc, s.OldestDue.Seconds())
		gauge(m.stuckDesc, float64(s.Stuck))
	}
}

var _ prometheus.Collector = (*Metrics)(nil)

package metrics

import (
	"context"
	"database/sql"
	"time"

	"github.com/mailspool/mailspool/throttle"
	"github.com/prometheus/client_golang/prometheus"
)

// Throttle exposes the send limits' state (package throttle), read from
// the database at each scrape, and counts the slow-downs this process
// made (OnSlow).
type Throttle struct {
	st        *throttle.Store
	slowdowns *prometheus.CounterVec
	factor    *prometheus.Desc
	inFlight  *prometheus.Desc
	ahead     *prometheus.Desc
	granted   *prometheus.Desc
	refused   *prometheus.Desc
	up        *prometheus.Desc
}

// NewThrottle returns the collector for the limits on db.
func NewThrottle(db *sql.DB) (*Throttle, error) {
	st, err := throttle.Open(db)
	if err != nil {
		return nil, err
	}
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("mailspool_throttle_"+name, help, []string{"key"}, nil)
	}
	return &Throttle{
		st: st,
		slowdowns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mailspool_throttle_slowdowns_total",
			Help: "Slow-downs this process made after a reply matched a rule, by lane, limit key and rule."}, []string{"lane", "key", "rule"}),
		factor:   d("rate_factor", "The limit's rate multiplier now: 1 is the configured rate, below 1 slowed down by a reply."),
		inFlight: d("in_flight", "Sends holding a slot of the limit's concurrency now (live leases)."),
		ahead:    d("ahead_seconds", "How far the limit's rate schedule runs ahead of now: about how long the next mail to it waits."),
		granted:  d("granted_total", "Sends the limit let start, every worker together."),
		refused:  d("refused_total", "Sends the limit made wait at their start, every worker together."),
		up:       prometheus.NewDesc("mailspool_throttle_up", "1 when the limits' state could be read at this scrape.", nil, nil),
	}, nil
}

// OnSlow counts a slow-down (throttle.Policy.OnSlow).
func (t *Throttle) OnSlow(ev throttle.SlowEvent) {
	t.slowdowns.WithLabelValues(ev.Lane, ev.Key, ev.Rule).Inc()
}

// Describe implements prometheus.Collector.
func (t *Throttle) Describe(ch chan<- *prometheus.Desc) {
	t.slowdowns.Describe(ch)
	for _, d := range []*prometheus.Desc{t.factor, t.inFlight, t.ahead, t.granted, t.refused, t.up} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (t *Throttle) Collect(ch chan<- prometheus.Metric) {
	t.slowdowns.Collect(ch)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	keys, err := t.st.Status(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(t.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(t.up, prometheus.GaugeValue, 1)
	for _, k := range keys {
		ch <- prometheus.MustNewConstMetric(t.factor, prometheus.GaugeValue, k.Factor, k.Key)
		ch <- prometheus.MustNewConstMetric(t.inFlight, prometheus.GaugeValue, float64(k.InFlight), k.Key)
		ch <- prometheus.MustNewConstMetric(t.ahead, prometheus.GaugeValue, k.Ahead.Seconds(), k.Key)
		ch <- prometheus.MustNewConstMetric(t.granted, prometheus.CounterValue, float64(k.Granted), k.Key)
		ch <- prometheus.MustNewConstMetric(t.refused, prometheus.CounterValue, float64(k.Refused), k.Key)
	}
}

var _ prometheus.Collector = (*Throttle)(nil)

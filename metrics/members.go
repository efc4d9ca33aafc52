package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mailspool/mailspool/transport/composite"
)

// Members is the Prometheus collector of a lane whose transport is a
// composite (failover(...), roundrobin(...)): per member, whether this
// process sees it up, its weight, and the sends it answered by outcome.
// A member's share is rate(mailspool_member_sends_total{outcome="sent"})
// over the lane's sum.
//
//	mailspool_member_up{lane, member}                 1 up, 0 down
//	mailspool_member_weight{lane, member}             its round-robin weight (1 for failover)
//	mailspool_member_sends_total{lane, member, outcome}  sent or failed
type Members struct {
	lane              string
	tr                *composite.Transport
	up, weight, sends *prometheus.Desc
}

// NewMembers returns the collector of lane's composite tr; register it
// on the registry of the admin listener.
func NewMembers(lane string, tr *composite.Transport) *Members {
	labels := []string{"lane", "member"}
	return &Members{
		lane: lane, tr: tr,
		up:     prometheus.NewDesc("mailspool_member_up", "Whether this process sees the lane member up (1) or down (0), from the member health shared through the database.", labels, nil),
		weight: prometheus.NewDesc("mailspool_member_weight", "The lane member's round-robin weight (1 for failover).", labels, nil),
		sends:  prometheus.NewDesc("mailspool_member_sends_total", "Sends through the lane member by this process, by outcome (sent or failed).", append(labels, "outcome"), nil),
	}
}

// Describe implements prometheus.Collector.
func (m *Members) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.up
	ch <- m.weight
	ch <- m.sends
}

// Collect implements prometheus.Collector.
func (m *Members) Collect(ch chan<- prometheus.Metric) {
	for _, s := range m.tr.Members() {
		up := 1.0
		if s.Down {
			up = 0
		}
		ch <- prometheus.MustNewConstMetric(m.up, prometheus.GaugeValue, up, m.lane, s.Name)
		ch <- prometheus.MustNewConstMetric(m.weight, prometheus.GaugeValue, float64(s.Weight), m.lane, s.Name)
		ch <- prometheus.MustNewConstMetric(m.sends, prometheus.CounterValue, float64(s.Sent), m.lane, s.Name, "sent")
		ch <- prometheus.MustNewConstMetric(m.sends, prometheus.CounterValue, float64(s.Failed), m.lane, s.Name, "failed")
	}
}

var _ prometheus.Collector = (*Members)(nil)

package metrics

import (
	"github.com/mailspool/mailspool/inbound"
	"github.com/mailspool/mailspool/unsubscribe"
	"github.com/prometheus/client_golang/prometheus"
)

// Inbound counts the provider webhooks' events and refusals: a
// prometheus.Collector whose Observe and Reject are the inbound.Options
// ObserveFunc and RejectFunc.
type Inbound struct {
	events   *prometheus.CounterVec
	rejected *prometheus.CounterVec
	unsub    *prometheus.CounterVec
}

// NewInbound returns the webhook counters, at zero.
func NewInbound() *Inbound {
	return &Inbound{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailspool_provider_events_total",
			Help: "Provider events recorded for the first time, by provider (ses, sendgrid), event type (delivered, bounced, soft_bounced, complained, ...) and the lane of the mail it is about (\"\" when no lane's mail has the provider's message id).",
		}, []string{"provider", "type", "lane"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailspool_webhook_rejected_total",
			Help: "Webhook requests refused with a 4xx, by provider and reason (signature, malformed, too_large, method).",
		}, []string{"provider", "reason"}),
		unsub: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailspool_unsubscribe_requests_total",
			Help: "Requests to the one-click unsubscribe links, by outcome (unsubscribed, already, page, invalid, bad_request).",
		}, []string{"outcome"}),
	}
}

// Observe counts an event recorded for the first time (the bounce
// listener's ObserveFunc).
func (m *Inbound) Observe(e inbound.Event) {
	m.events.WithLabelValues(e.Provider, e.Type, e.Lane).Inc()
}

// Unsubscribe makes h count its requests.
func (m *Inbound) Unsubscribe(h *unsubscribe.Handler) {
	h.ObserveFunc = func(outcome string) { m.unsub.WithLabelValues(outcome).Inc() }
}

// Options returns o with the counters as its ObserveFunc and RejectFunc.
func (m *Inbound) Options(o inbound.Options) inbound.Options {
	o.ObserveFunc = m.Observe
	o.RejectFunc = func(provider, reason string) { m.rejected.WithLabelValues(provider, reason).Inc() }
	return o
}

// Describe implements prometheus.Collector.
func (m *Inbound) Describe(ch chan<- *prometheus.Desc) {
	m.events.Describe(ch)
	m.rejected.Describe(ch)
	m.unsub.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Inbound) Collect(ch chan<- prometheus.Metric) {
	m.events.Collect(ch)
	m.rejected.Collect(ch)
	m.unsub.Collect(ch)
}

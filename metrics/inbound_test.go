package metrics

import (
	"testing"

	"github.com/mailspool/mailspool/inbound"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInboundCounts(t *testing.T) {
	m := NewInbound()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	o := m.Options(inbound.Options{})
	o.ObserveFunc(inbound.Event{Provider: inbound.SendGrid, Type: inbound.Bounced})
	o.ObserveFunc(inbound.Event{Provider: inbound.SendGrid, Type: inbound.Bounced})
	o.ObserveFunc(inbound.Event{Provider: inbound.SES, Type: inbound.Complained, Lane: "news", MailID: 7})
	o.RejectFunc(inbound.SES, "signature")
	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			got[key] = m.GetCounter().GetValue()
		}
	}
	assert.Equal(t, map[string]float64{
		"mailspool_provider_events_total lane= provider=sendgrid type=bounced":   2,
		"mailspool_provider_events_total lane=news provider=ses type=complained": 1,
		"mailspool_webhook_rejected_total provider=ses reason=signature":         1,
	}, got)
}

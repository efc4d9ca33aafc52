package composite_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/mailspool/mailspool/conformance"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/composite"
	"github.com/mailspool/mailspool/transport/fake"
)

// steps is the fake script step that plays each scenario.
var steps = map[conformance.Scenario]string{
	conformance.Accept: "ok", conformance.SMTP421: "421", conformance.SMTP450: "450", conformance.SMTP451: "451",
	conformance.SMTP452: "452", conformance.SMTP550: "550", conformance.SMTP552: "552", conformance.SMTP553: "553",
	conformance.SMTP554: "554", conformance.Hang: "hang", conformance.Refused: "refused", conformance.TLSFailure: "tls",
	conformance.StallAfterData: "stall", conformance.HTTP429: "http-429", conformance.HTTP401: "http-401", conformance.HTTP500: "http-500",
}

// harness opens a composite through its URL, with the fake as members:
// in "failover" form the first member is down (its probe an hour away),
// so every send is routed past it to the member playing the scenario;
// in "single" form roundrobin(...) has that member only.
type harness struct {
	form   string
	secret string
	fakes  []*fake.Transport
}

type recordingOpener struct{ h *harness }

func (o recordingOpener) OpenTransportURL(ctx context.Context, u *url.URL) (transport.Transport, error) {
	tr, err := fake.URLOpener{}.OpenTransportURL(ctx, u)
	if err != nil {
		return nil, err
	}
	o.h.fakes = append(o.h.fakes, tr.(*fake.Transport))
	return tr, nil
}

func (h *harness) Open(ctx context.Context, s conformance.Scenario) (transport.Transport, error) {
	step, ok := steps[s]
	if !ok {
		return nil, fmt.Errorf("%w: no step for %s", conformance.ErrUnsupported, s)
	}
	var mux transport.Mux
	mux.Register("fake", recordingOpener{h})
	member := (&url.URL{Scheme: "fake", User: url.UserPassword("conformance", h.secret), Host: "b.example", RawQuery: url.Values{"script": {step}}.Encode()}).String()
	health := &composite.Memory{}
	raw := "roundrobin(" + member + ")"
	if h.form == "failover" {
		raw = "failover(fake://a.example?script=ok, " + member + "; probe=1h)"
		now := time.Now()
		if _, err := health.MarkDown(ctx, "default", "fake://a.example", "test: down", now, now.Add(time.Hour)); err != nil {
			return nil, err
		}
	}
	return composite.Open(ctx, raw, &mux, composite.Options{Health: health})
}

func (h *harness) Attempts() int {
	n := 0
	for _, f := range h.fakes {
		n += f.Attempts()
	}
	return n
}

func (h *harness) Received() ([]conformance.Received, error) {
	var rs []conformance.Received
	for _, f := range h.fakes {
		for _, m := range f.Sent() {
			rs = append(rs, conformance.ReceivedFromMessage(&m))
		}
	}
	return rs, nil
}

func (h *harness) Secret() string { return h.secret }
func (h *harness) Close() error   { return nil }

func TestConformance(t *testing.T) {
	t.Parallel()
	for _, form := range []string{"failover", "single"} {
		t.Run(form, func(t *testing.T) {
			t.Parallel()
			conformance.RunTransportTests(t, func(context.Context, *testing.T) (conformance.Harness, error) {
				return &harness{form: form, secret: "pw-" + rand.Text()}, nil
			})
		})
	}
}

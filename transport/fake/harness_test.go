package fake_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"testing"

	"github.com/mailspool/mailspool/conformance"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/fake"
)

// steps is the fake script step that plays each scenario.
var steps = map[conformance.Scenario]string{
	conformance.Accept:         "ok",
	conformance.SMTP421:        "421",
	conformance.SMTP450:        "450",
	conformance.SMTP451:        "451",
	conformance.SMTP452:        "452",
	conformance.SMTP550:        "550",
	conformance.SMTP552:        "552",
	conformance.SMTP553:        "553",
	conformance.SMTP554:        "554",
	conformance.Hang:           "hang",
	conformance.Refused:        "refused",
	conformance.TLSFailure:     "tls",
	conformance.StallAfterData: "stall",
	conformance.HTTP429:        "http-429",
	conformance.HTTP401:        "http-401",
	conformance.HTTP500:        "http-500",
}

// harness opens the fake through its URL, with a password in the URL as
// the secret; the fake's records are its backend.
type harness struct {
	secret string
	tr     *fake.Transport
}

func newHarness(context.Context, *testing.T) (conformance.Harness, error) {
	return &harness{secret: "pw-" + rand.Text()}, nil
}

func (h *harness) Open(ctx context.Context, s conformance.Scenario) (transport.Transport, error) {
	step, ok := steps[s]
	if !ok {
		return nil, fmt.Errorf("%w: no step for %s", conformance.ErrUnsupported, s)
	}
	u := &url.URL{
		Scheme:   fake.Scheme,
		User:     url.UserPassword("conformance", h.secret),
		Host:     "localhost",
		RawQuery: url.Values{"script": {step}}.Encode(),
	}
	tr, err := fake.URLOpener{}.OpenTransportURL(ctx, u)
	if err != nil {
		return nil, err
	}
	h.tr = tr.(*fake.Transport)
	return tr, nil
}

func (h *harness) Attempts() int { return h.tr.Attempts() }

func (h *harness) Received() ([]conformance.Received, error) {
	var rs []conformance.Received
	for _, m := range h.tr.Sent() {
		rs = append(rs, conformance.ReceivedFromMessage(&m))
	}
	return rs, nil
}

func (h *harness) Secret() string { return h.secret }

func (h *harness) Close() error { return nil }

package sendgrid

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/sendgrid/rest"
	"github.com/sendgrid/sendgrid-go"

	"github.com/mailspool/mailspool/classify"
	"github.com/mailspool/mailspool/transport"
)

// sendPath is the v3 mail send endpoint, relative to the base URL.
const sendPath = "/v3/mail/send"

// ErrClosed is in the chain of the error Send returns after Close.
var ErrClosed = errors.New("sendgrid: transport is closed")

// Transport sends mail through the SendGrid v3 API. It is safe for
// concurrent use; open it with Open or URLOpener.
type Transport struct {
	key    string
	base   string
	hc     *http.Client
	client *rest.Client
	closed atomic.Bool
}

func newTransport(key, base string, timeout time.Duration) *Transport {
	hc := newHTTPClient(timeout)
	return &Transport{key: key, base: base, hc: hc, client: &rest.Client{HTTPClient: hc}}
}

// Send posts m to /v3/mail/send once. A 2xx answer is success and the
// Receipt's MessageID is SendGrid's X-Message-Id; every other outcome is a
// *transport.Error as the package documentation lists. An invalid m is
// Permanent and never reaches the wire.
func (t *Transport) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	if t.closed.Load() {
		return transport.Receipt{}, &transport.Error{Kind: transport.Connection, Rule: "transport-closed", Err: ErrClosed}
	}
	body, err := requestBody(m)
	if err != nil {
		return transport.Receipt{}, &transport.Error{Kind: transport.Permanent, Rule: "invalid-message", Err: err}
	}
	r := sendgrid.GetRequest(t.key, sendPath, t.base)
	r.Method = rest.Post // GetRequest leaves it empty, which would be a GET
	r.Body = body

	// wrote is set once the whole request, body included, went out: from
	// then on a missing answer may hide an accepted mail.
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) {
			if i.Err == nil {
				wrote.Store(true)
			}
		},
	})
	resp, err := t.client.SendWithContext(ctx, r)
	if resp == nil {
		if wrote.Load() {
			return transport.Receipt{}, classify.MaybeDelivered(err)
		}
		return transport.Receipt{}, classify.Error(err)
	}
	// A response whose body could not be read still has its status.
	return outcome(resp, t.key)
}

// Close releases idle connections. It is idempotent; Send after Close
// fails with ErrClosed in its chain.
func (t *Transport) Close() error {
	t.closed.Store(true)
	t.hc.CloseIdleConnections()
	return nil
}

var _ transport.Transport = (*Transport)(nil)

package sendgrid

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sendgrid/rest"
	sg "github.com/sendgrid/sendgrid-go"

	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/internal/httpapi"
	"github.com/mailspool/mailspool/transport/internal/render"
	"github.com/mailspool/mailspool/transport/internal/urlopt"
)

// sendPath is the v3 mail send endpoint, relative to the base URL.
const sendPath = "/v3/mail/send"

// Base URLs of the SendGrid API.
const (
	DefaultEndpoint = "https://api.sendgrid.com"
	EUEndpoint      = "https://api.eu.sendgrid.com"
)

// DefaultTimeout bounds one Send when Options.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// EnvAPIKey is the environment variable read when no API key is given.
const EnvAPIKey = "SENDGRID_API_KEY"

// Options configures a Transport. The zero value sends to DefaultEndpoint
// with the key from EnvAPIKey.
type Options struct {
	// APIKey authenticates to SendGrid; empty means os.Getenv(EnvAPIKey).
	APIKey string
	// Endpoint is the API base URL (scheme, host, optional path prefix);
	// empty means DefaultEndpoint.
	Endpoint string
	// Timeout bounds one Send, including reading the response; zero means
	// DefaultTimeout.
	Timeout time.Duration
}

// Open returns a Transport for the SendGrid v3 API. It fails when no API
// key is set, or when the key or endpoint is malformed; it does not contact
// SendGrid. A nil opts means the zero Options.
func Open(ctx context.Context, opts *Options) (*Transport, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.APIKey == "" {
		o.APIKey = os.Getenv(EnvAPIKey)
	}
	if err := checkKey(o.APIKey); err != nil {
		return nil, err
	}
	if o.Endpoint == "" {
		o.Endpoint = DefaultEndpoint
	}
	base, err := parseEndpoint(o.Endpoint)
	if err != nil {
		return nil, err
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("sendgrid: timeout %v is negative", o.Timeout)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	return &Transport{key: o.APIKey, base: base, timeout: o.Timeout, http: httpapi.NewClient(nil)}, nil
}

// checkKey reports a missing or malformed key without ever quoting it.
func checkKey(key string) error {
	if key == "" {
		return errors.New("sendgrid: no API key: set the URL password (sendgrid://apikey:KEY@default), Options.APIKey or " + EnvAPIKey)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c <= ' ' || c > '~' {
			return errors.New("sendgrid: the API key contains spaces, control or non-ASCII characters")
		}
	}
	return nil
}

// parseEndpoint checks an API base URL and returns it without a trailing
// slash.
func parseEndpoint(raw string) (string, error) {
	u, err := urlopt.Endpoint(raw)
	if err != nil {
		return "", fmt.Errorf("sendgrid: %w", err)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// Transport sends mail through the SendGrid v3 API. It is safe for
// concurrent use; open it with Open or URLOpener.
type Transport struct {
	key     string
	base    string
	timeout time.Duration
	http    *httpapi.Client
}

// Send posts m to /v3/mail/send once. A 2xx answer is success and the
// Receipt's MessageID is SendGrid's X-Message-Id; every other outcome is a
// *transport.Error as the package documentation lists. An invalid m is
// Permanent and never reaches the wire.
func (t *Transport) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	if err := t.http.CheckOpen(); err != nil {
		return transport.Receipt{}, err
	}
	body, err := requestBody(m)
	if te := render.Unwritable(err, "SendGrid"); te != nil {
		return transport.Receipt{}, te
	}
	if err != nil {
		return transport.Receipt{}, &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeMessage, Rule: "invalid-message", Err: err}
	}
	if n := m.EncodedSize(); n > MaxMessageSize {
		return transport.Receipt{}, &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeMessage, Enhanced: "5.3.4", Rule: "sendgrid-size",
			Detail: fmt.Sprintf("message of %d bytes encoded is over the SendGrid limit of %d", n, MaxMessageSize)}
	}
	r := sg.GetRequest(t.key, sendPath, t.base)
	r.Method = rest.Post // GetRequest leaves it empty, which would be a GET
	r.Body = body

	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	ctx, wrote := httpapi.TraceWrite(ctx)
	// One attempt: not the SDK's MakeRequestRetry, which retries and
	// sleeps without honouring ctx.
	resp, err := (&rest.Client{HTTPClient: t.http.HTTP}).SendWithContext(ctx, r)
	if resp == nil {
		return transport.Receipt{}, httpapi.NoAnswer(err, wrote())
	}
	// A response whose body could not be read still has its status.
	return outcome(resp, t.key)
}

// Close releases idle connections. It is idempotent; Send after Close
// fails with transport.ErrClosed in its chain.
func (t *Transport) Close() error {
	t.http.Close()
	return nil
}

var _ transport.Transport = (*Transport)(nil)

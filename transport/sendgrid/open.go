package sendgrid

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/internal/urlopt"
)

// Scheme is the URL scheme this package opens.
const Scheme = "sendgrid"

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
	return newTransport(o.APIKey, base, o.Timeout), nil
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

// URLOpener opens "sendgrid://" URLs (see the package documentation). Its
// zero value is ready to use.
type URLOpener struct{}

// OpenTransportURL opens a Transport from u. Errors never contain the key.
func (URLOpener) OpenTransportURL(ctx context.Context, u *url.URL) (transport.Transport, error) {
	opts, err := optionsFromURL(u)
	if err != nil {
		return nil, err
	}
	return Open(ctx, opts)
}

func optionsFromURL(u *url.URL) (*Options, error) {
	if !strings.EqualFold(u.Scheme, Scheme) {
		return nil, fmt.Errorf("sendgrid: URL scheme %q is not %q", u.Scheme, Scheme)
	}
	if err := transport.CheckQuery(u, "endpoint", "timeout"); err != nil {
		return nil, err
	}
	var o Options
	if u.User != nil {
		// The user name is never quoted: a key put there by mistake would leak.
		if name := u.User.Username(); name != "" && name != "apikey" {
			return nil, errors.New("sendgrid: the URL user name must be empty or \"apikey\"; the API key goes in the password (sendgrid://apikey:KEY@default)")
		}
		o.APIKey, _ = u.User.Password()
	}
	q := u.Query()
	o.Endpoint = q.Get("endpoint")
	switch strings.ToLower(u.Host) {
	case "default":
	case "eu":
		if o.Endpoint != "" {
			return nil, fmt.Errorf("sendgrid: URL %q has both the host \"eu\" and an endpoint; use host \"default\" with an endpoint", transport.RedactURL(u))
		}
		o.Endpoint = EUEndpoint
	default:
		return nil, fmt.Errorf("sendgrid: URL %q: host must be \"default\" or \"eu\" (use the endpoint parameter for another server)", transport.RedactURL(u))
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("sendgrid: URL %q must not have a path", transport.RedactURL(u))
	}
	timeout, err := urlopt.Timeout(u)
	if err != nil {
		return nil, fmt.Errorf("sendgrid: %w", err)
	}
	o.Timeout = timeout
	return &o, nil
}

// newHTTPClient returns a client that never follows redirects (a redirected
// POST could be a second attempt) and gives up after timeout.
func newHTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Transport: http.DefaultTransport.(*http.Transport).Clone(),
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

package sendgrid

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/internal/urlopt"
)

// Scheme is the URL scheme this package opens.
const Scheme = "sendgrid"

// MaxMessageSize is the largest message SendGrid's v3 API takes (30 MB in
// all, attachments included, counted here encoded): the default size limit
// of a lane that sends through SendGrid, and what Send refuses as
// Permanent above.
const MaxMessageSize = 30_000_000

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
	var o Options
	if u.User != nil {
		// The user name is never quoted: a key put there by mistake would
		// leak. So it is checked first, before any error that quotes the
		// URL (they show its user name).
		if name := u.User.Username(); name != "" && name != "apikey" {
			return nil, errors.New("sendgrid: the URL user name must be empty or \"apikey\"; the API key goes in the password (sendgrid://apikey:KEY@default)")
		}
		o.APIKey, _ = u.User.Password()
	}
	if err := transport.CheckQuery(u, "endpoint", "timeout"); err != nil {
		return nil, err
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

package ses

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
const Scheme = "ses"

// MaxMessageSize is the largest message Amazon SES v2 takes, after
// encoding (40 MB, attachments included): the default size limit of a lane
// that sends through SES, and what Send refuses as Permanent above.
const MaxMessageSize = 40_000_000

// URLOpener opens "ses://" URLs (see the package documentation). Its zero
// value is ready to use.
type URLOpener struct{}

// OpenTransportURL opens a Transport from u. Errors never contain the
// secret access key.
func (URLOpener) OpenTransportURL(ctx context.Context, u *url.URL) (transport.Transport, error) {
	opts, err := optionsFromURL(u)
	if err != nil {
		return nil, err
	}
	return Open(ctx, opts)
}

// optionsFromURL reads Options from a "ses://" URL.
func optionsFromURL(u *url.URL) (*Options, error) {
	if !strings.EqualFold(u.Scheme, Scheme) {
		return nil, fmt.Errorf("ses: URL scheme %q is not %q", u.Scheme, Scheme)
	}
	var o Options
	if u.User != nil {
		o.AccessKeyID = u.User.Username()
		o.SecretAccessKey, _ = u.User.Password()
		if o.AccessKeyID == "" || o.SecretAccessKey == "" {
			// Neither part is quoted: a secret put in the wrong place would
			// leak. So this is checked first, before any error that quotes
			// the URL (they show its user name).
			return nil, errors.New("ses: the URL user info must be ACCESS_KEY_ID:SECRET_ACCESS_KEY, both non-empty")
		}
	}
	if err := transport.CheckQuery(u, "region", "configuration_set", "endpoint", "timeout"); err != nil {
		return nil, err
	}
	if !strings.EqualFold(u.Host, "default") {
		return nil, fmt.Errorf("ses: URL %q: host must be \"default\" (use the region and endpoint parameters)", transport.RedactURL(u))
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("ses: URL %q must not have a path", transport.RedactURL(u))
	}
	q := u.Query()
	o.Region = q.Get("region")
	o.ConfigurationSet = q.Get("configuration_set")
	o.Endpoint = q.Get("endpoint")
	timeout, err := urlopt.Timeout(u)
	if err != nil {
		return nil, fmt.Errorf("ses: %w", err)
	}
	o.Timeout = timeout
	return &o, nil
}

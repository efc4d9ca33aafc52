// Package urlopt reads the options that the HTTP API adapters take alike:
// the API base URL ("endpoint") and the bound on one Send ("timeout").
// Its errors leave out the package name, for the adapter to put its own
// in front ("ses: %w"), and never contain a password.
package urlopt

import (
	"fmt"
	"net/url"
	"time"

	"github.com/mailspool/mailspool/internal/duration"
	"github.com/mailspool/mailspool/transport"
)

// Endpoint parses raw as an API base URL: http or https, with a host,
// without user info, query or fragment; it may have a path prefix.
func Endpoint(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("endpoint %q is not an http:// or https:// URL", transport.Redact(raw))
	}
	switch {
	case u.User != nil:
		// Checked first, and not quoted: a token in the user name
		// ("https://TOKEN@proxy") would leak, and the other errors
		// quote the URL.
		shown := *u
		shown.User = url.User("xxxxx")
		return nil, fmt.Errorf("endpoint %q must not contain user info", transport.RedactURL(&shown))
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("endpoint %q must start with http:// or https://", transport.RedactURL(u))
	case u.Host == "":
		return nil, fmt.Errorf("endpoint %q has no host", transport.RedactURL(u))
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("endpoint %q must not have a query or fragment", transport.RedactURL(u))
	}
	return u, nil
}

// Timeout returns the "timeout" query parameter of u, a positive duration
// like 30s, or zero when u has none.
func Timeout(u *url.URL) (time.Duration, error) {
	s := u.Query().Get("timeout")
	if s == "" {
		return 0, nil
	}
	d, err := duration.Positive(s)
	if err != nil {
		return 0, fmt.Errorf("timeout in URL %q: %w", transport.RedactURL(u), err)
	}
	return d, nil
}

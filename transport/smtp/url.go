package smtp

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/mailspool/mailspool/internal/duration"
	"github.com/mailspool/mailspool/transport"
)

// The URL schemes of this adapter.
const (
	// Scheme is SMTP with STARTTLS (mandatory unless tls=none).
	Scheme = "smtp"
	// SchemeTLS is SMTP over implicit TLS (port 465).
	SchemeTLS = "smtps"
)

// URLOpener opens "smtp" and "smtps" URLs (see the package documentation).
// The zero value is ready to use.
type URLOpener struct{}

// params are the known query parameters, one per Options field.
var params = []string{"tls", "timeout", "helo", "server_name", "ca_file", "password_env", "idle_timeout", "pool"}

// OpenTransportURL opens a Transport from u. Its errors show u only with
// the password redacted.
func (URLOpener) OpenTransportURL(ctx context.Context, u *url.URL) (transport.Transport, error) {
	host, port, opts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	t, err := Open(ctx, host, port, opts)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, transport.RedactURL(u))
	}
	return t, nil
}

// parseURL splits u into Open's arguments.
func parseURL(u *url.URL) (host string, port int, opts *Options, err error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("smtp: "+format+" in %s", append(args, transport.RedactURL(u))...)
	}
	opts = &Options{}
	switch u.Scheme {
	case Scheme:
		opts.TLS = StartTLS
	case SchemeTLS:
		opts.TLS = ImplicitTLS
	default:
		return "", 0, nil, bad("scheme %q is not smtp or smtps", u.Scheme)
	}
	if u.Opaque != "" || (u.Path != "" && u.Path != "/") || u.Fragment != "" {
		return "", 0, nil, bad("unexpected path or fragment")
	}
	if err := transport.CheckQuery(u, params...); err != nil {
		return "", 0, nil, err
	}
	q := u.Query()
	if v := q.Get("tls"); v != "" {
		mode := TLSMode(v)
		if u.Scheme == SchemeTLS && mode != ImplicitTLS {
			return "", 0, nil, bad("smtps means tls=implicit, not tls=%s", v)
		}
		opts.TLS = mode
	}
	host = u.Hostname()
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil || port <= 0 {
			return "", 0, nil, bad("invalid port %q", p)
		}
	}
	if u.User != nil {
		opts.Username = u.User.Username()
		opts.Password, _ = u.User.Password()
	}
	opts.HELO = q.Get("helo")
	opts.ServerName = q.Get("server_name")
	opts.CAFile = q.Get("ca_file")
	opts.PasswordEnv = q.Get("password_env")
	for name, d := range map[string]*time.Duration{"timeout": &opts.Timeout, "idle_timeout": &opts.IdleTimeout} {
		if v := q.Get(name); v != "" {
			if *d, err = duration.Positive(v); err != nil {
				return "", 0, nil, bad("%s: %v", name, err)
			}
		}
	}
	if v := q.Get("pool"); v != "" {
		if opts.Pool, err = strconv.Atoi(v); err != nil || opts.Pool <= 0 {
			return "", 0, nil, bad("pool=%q is not a positive number", v)
		}
	}
	return host, port, opts, nil
}

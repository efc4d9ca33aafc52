package fake

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mailspool/mailspool/internal/duration"
	"github.com/mailspool/mailspool/transport"
)

// Scheme is the URL scheme of the fake transport.
const Scheme = "fake"

// URLOpener opens fake transports from URLs such as
// "fake://?script=ok,421,550&cycle=true". Its zero value is ready to use.
//
// Query parameters map to [Options]: script (comma-separated steps), cycle
// and recipient (booleans), timeout and latency (Go durations such as
// "2s" or "5ms"). The host and user info are ignored. Unknown parameters,
// unknown steps and bad values are errors.
type URLOpener struct{}

// OpenTransportURL opens a fake Transport as u describes.
func (URLOpener) OpenTransportURL(_ context.Context, u *url.URL) (transport.Transport, error) {
	opts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	t, err := newTransport(opts)
	if err != nil {
		return nil, fmt.Errorf("%w in URL %q", err, transport.RedactURL(u))
	}
	return t, nil
}

func parseURL(u *url.URL) (*Options, error) {
	if u.Scheme != Scheme {
		return nil, fmt.Errorf("fake: URL %q has scheme %q, want %q", transport.RedactURL(u), u.Scheme, Scheme)
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("fake: URL %q has a path; give options as query parameters", transport.RedactURL(u))
	}
	if err := transport.CheckQuery(u, "script", "cycle", "recipient", "timeout", "latency"); err != nil {
		return nil, err
	}
	q := u.Query()
	opts := &Options{}
	if s := q.Get("script"); s != "" {
		for step := range strings.SplitSeq(s, ",") {
			opts.Script = append(opts.Script, strings.TrimSpace(step))
		}
	}
	var err error
	for _, b := range []struct {
		name string
		dst  *bool
	}{{"cycle", &opts.Cycle}, {"recipient", &opts.Recipient}} {
		if v := q.Get(b.name); v != "" {
			if *b.dst, err = strconv.ParseBool(v); err != nil {
				return nil, fmt.Errorf("fake: %s=%q in URL %q is not a boolean", b.name, v, transport.RedactURL(u))
			}
		}
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"timeout", &opts.Timeout}, {"latency", &opts.Latency}} {
		if v := q.Get(d.name); v != "" {
			if *d.dst, err = duration.Positive(v); err != nil {
				return nil, fmt.Errorf("fake: %s in URL %q: %w", d.name, transport.RedactURL(u), err)
			}
		}
	}
	return opts, nil
}

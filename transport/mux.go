package transport

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// URLOpener opens a Transport from a URL whose scheme it was registered
// under. Each adapter package exports one whose zero value works.
type URLOpener interface {
	OpenTransportURL(ctx context.Context, u *url.URL) (Transport, error)
}

// Mux maps URL schemes to URLOpeners. The zero value is an empty Mux ready to
// use; it is safe for concurrent use. A program builds its own Mux and
// registers the adapters it ships (there is no global registry).
type Mux struct {
	mu      sync.RWMutex
	openers map[string]URLOpener
}

// Register makes o open URLs with the given scheme. It panics if o is nil,
// the scheme is empty, or the scheme is already registered.
func (m *Mux) Register(scheme string, o URLOpener) {
	if o == nil {
		panic("transport: Register of nil opener for scheme " + fmt.Sprintf("%q", scheme))
	}
	scheme = strings.ToLower(scheme)
	if scheme == "" {
		panic("transport: Register with an empty scheme")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.openers == nil {
		m.openers = make(map[string]URLOpener)
	}
	if _, dup := m.openers[scheme]; dup {
		panic("transport: scheme " + fmt.Sprintf("%q", scheme) + " registered twice")
	}
	m.openers[scheme] = o
}

// Schemes returns the registered schemes, sorted.
func (m *Mux) Schemes() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s := make([]string, 0, len(m.openers))
	for k := range m.openers {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// OpenTransport parses rawURL and opens a Transport with the opener
// registered for its scheme. Errors never contain the URL's password.
func (m *Mux) OpenTransport(ctx context.Context, rawURL string) (Transport, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Parse's error quotes the whole URL, password included.
		return nil, fmt.Errorf("transport: cannot parse transport URL %q", Redact(rawURL))
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("transport: transport URL %q has no scheme (want one of %s)", redacted(u), strings.Join(m.Schemes(), ", "))
	}
	m.mu.RLock()
	o := m.openers[strings.ToLower(u.Scheme)]
	m.mu.RUnlock()
	if o == nil {
		return nil, fmt.Errorf("transport: unknown transport scheme %q in %q (registered: %s)", u.Scheme, redacted(u), strings.Join(m.Schemes(), ", "))
	}
	return o.OpenTransportURL(ctx, u)
}

// Redact returns rawURL with any password replaced by "xxxxx", also when
// rawURL does not parse (then everything between "://" and the last "@"
// before the path is replaced).
func Redact(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil {
		return redacted(u)
	}
	i := strings.Index(rawURL, "://")
	if i < 0 {
		return rawURL
	}
	rest := rawURL[i+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		return rawURL[:i+3] + "xxxxx" + rest[at:]
	}
	return rawURL
}

// redacted is u.Redacted() that keeps the "//" of a URL with an empty host
// ("fake://?script=ok"), which url.URL.String drops.
func redacted(u *url.URL) string {
	s := u.Redacted()
	if u.Scheme != "" && u.Opaque == "" && u.Host == "" && u.User == nil {
		if rest, ok := strings.CutPrefix(s, u.Scheme+":"); ok && !strings.HasPrefix(rest, "//") {
			return u.Scheme + "://" + rest
		}
	}
	return s
}

// CheckQuery returns an error naming the first query parameter of u that is
// not in known, so a misspelt option is an error instead of being ignored.
func CheckQuery(u *url.URL, known ...string) error {
	q := u.Query()
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(known, k) {
			return fmt.Errorf("transport: unknown parameter %q in %s URL %q (known: %s)", k, u.Scheme, redacted(u), strings.Join(known, ", "))
		}
		if len(q[k]) > 1 {
			return fmt.Errorf("transport: parameter %q given %d times in %s URL %q", k, len(q[k]), u.Scheme, redacted(u))
		}
	}
	return nil
}

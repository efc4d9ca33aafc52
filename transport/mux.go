package transport

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
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
		return nil, fmt.Errorf("transport: transport URL %q has no scheme (want one of %s)", Redact(rawURL), strings.Join(m.Schemes(), ", "))
	}
	m.mu.RLock()
	o := m.openers[strings.ToLower(u.Scheme)]
	m.mu.RUnlock()
	if o == nil {
		return nil, fmt.Errorf("transport: unknown transport scheme %q in %q (registered: %s)", u.Scheme, Redact(rawURL), strings.Join(m.Schemes(), ", "))
	}
	return o.OpenTransportURL(ctx, u)
}

// Redact returns rawURL fit for logs and errors: any password replaced by
// "xxxxx", and the value of any query parameter whose name says it holds a
// secret (password, pass, pwd, secret, token, key; not a name ending in
// "_env", which names a variable). A query value that is itself a URL or a
// DSN ("endpoint=https://user:pw@proxy") has its whole user info, secret
// parameters and fragment replaced. When rawURL does not parse as a URL with
// user info where its "@" says there is some (a password containing "/",
// "#" or "?", a DSN like "user:pw@tcp(host)/db", "user:pw@host"),
// everything before its last "@" is replaced instead.
//
// A composite transport, "failover(URL, URL; options)" or
// "roundrobin(...)", has each of its member URLs redacted.
func Redact(rawURL string) string {
	if m := compositeForm.FindStringSubmatch(rawURL); m != nil && strings.Contains(m[2], "://") {
		return m[1] + redactMembers(m[2]) + m[3]
	}
	u, err := url.Parse(rawURL)
	// An "@" in the path is a password with "@" and "/" in it, which
	// parses as user info that ends at the first "@": hidden to the last.
	if err == nil && u.Opaque == "" && (u.User != nil || !strings.Contains(rawURL, "@")) && !strings.Contains(u.Path, "@") {
		u.RawQuery = redactQuery(u.RawQuery, u.Fragment)
		if u.Fragment != "" {
			u.Fragment, u.RawFragment = "xxxxx", ""
		}
		return redacted(u)
	}
	at := strings.LastIndex(rawURL, "@")
	if at < 0 {
		// No user info; still hide secret parameters.
		return redactLoose(rawURL)
	}
	prefix := ""
	if i := strings.Index(rawURL[:at], "://"); i >= 0 && urlScheme.MatchString(rawURL[:i]) {
		prefix = rawURL[:i+3]
	}
	return prefix + "xxxxx" + redactLoose(rawURL[at:])
}

// compositeForm is a composite transport: name(members).
var compositeForm = regexp.MustCompile(`(?s)^(\s*[A-Za-z]+\s*\()(.*)(\)\s*)$`)

// memberSep is the comma before a composite's next member URL.
var memberSep = regexp.MustCompile(`,\s*[A-Za-z][A-Za-z0-9+.-]*://`)

// redactMembers redacts each member URL of a composite's inside, and
// leaves its options (after a ";" that no member URL follows) as written.
func redactMembers(inner string) string {
	opts := ""
	for j := range len(inner) {
		if inner[j] == ';' && !strings.Contains(inner[j:], "://") {
			inner, opts = inner[:j], redactLoose(inner[j:])
			break
		}
	}
	var b strings.Builder
	last := 0
	for _, m := range memberSep.FindAllStringIndex(inner, -1) {
		b.WriteString(redactMember(inner[last:m[0]]))
		b.WriteString(",")
		last = m[0] + 1
	}
	b.WriteString(redactMember(inner[last:]))
	return b.String() + opts
}

// redactMember redacts one member URL, keeping the spaces around it.
func redactMember(s string) string {
	t := strings.TrimSpace(s)
	if t == "" {
		return s
	}
	i := strings.Index(s, t)
	return s[:i] + Redact(t) + s[i+len(t):]
}

// looseParam is a parameter name and its "=" anywhere in a string.
var looseParam = regexp.MustCompile(`[A-Za-z0-9_.%-]+=`)

// urlScheme is the syntax of a URL scheme (RFC 3986 3.1).
var urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

// RedactURL is Redact for a parsed URL; adapters use it in their errors
// instead of url.URL.Redacted, which shows secret parameters.
func RedactURL(u *url.URL) string { return Redact(u.String()) }

// redactLoose redacts what is left of a URL that did not parse: the values
// of secret parameters wherever "name=value" pairs appear, and any
// fragment whole.
func redactLoose(s string) string {
	s, _, hasFrag := strings.Cut(s, "#")
	var b strings.Builder
	last := 0
	for _, m := range looseParam.FindAllStringIndex(s, -1) {
		if m[0] < last || !secretParam(s[m[0]:m[1]-1]) {
			continue
		}
		end := m[1] + strings.IndexAny(s[m[1]:]+"&", "&")
		b.WriteString(s[last:m[1]])
		b.WriteString("xxxxx")
		last = end
	}
	b.WriteString(s[last:])
	s = b.String()
	if hasFrag {
		s += "#xxxxx"
	}
	return s
}

// redactQuery replaces the values of secret-looking parameters in a raw
// query string, and redacts any value that is itself a URL or a DSN (see
// redactValue), leaving everything else as written. fragment is what
// follows the query: a URL value with no "@" followed by one, there or in
// a later parameter, may have had its user info cut by a "&" or "#"
// written unescaped in its password, so it and all that follows it are
// replaced.
func redactQuery(raw, fragment string) string {
	if raw == "" {
		return raw
	}
	parts := strings.Split(raw, "&")
	for i, p := range parts {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		name, err := url.QueryUnescape(k)
		if err != nil {
			name = k
		}
		switch {
		case secretParam(name):
			parts[i] = k + "=xxxxx"
		case cutUserInfo(v, strings.Join(parts[i+1:], "&")+"#"+fragment):
			return strings.Join(append(parts[:i], k+"=xxxxx"), "&")
		default:
			parts[i] = k + "=" + redactValue(v)
		}
	}
	return strings.Join(parts, "&")
}

// cutUserInfo reports whether the raw query value v may be the start of a
// URL or DSN whose user info goes on past its end: it has a "://" or a
// ":" but no "@", and rest, the text after it, has one.
func cutUserInfo(v, rest string) bool {
	s := unescapeValue(v)
	return strings.Contains(s, ":") && !strings.Contains(s, "@") &&
		(strings.Contains(rest, "@") || strings.Contains(rest, "%40"))
}

// unescapeValue is url.QueryUnescape that keeps a "%" that does not start
// an escape instead of failing: what a query value says to a reader.
func unescapeValue(v string) string {
	if s, err := url.QueryUnescape(v); err == nil {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		switch {
		case v[i] == '+':
			b.WriteByte(' ')
		case v[i] == '%' && i+2 < len(v) && isHex(v[i+1]) && isHex(v[i+2]):
			b.WriteByte(unhex(v[i+1])<<4 | unhex(v[i+2]))
			i += 2
		default:
			b.WriteByte(v[i])
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// redactValue redacts a raw query value that is itself a URL or a DSN
// ("endpoint=https://user:pw@proxy"): everything between its scheme and
// its last "@" becomes "xxxxx" (the user name too: in a URL that is not a
// transport's own it may be a token), and so do its own secret parameters
// and its fragment. The value is read unescaped, as the adapter reads it;
// one that was written escaped is written back escaped. A value that is
// neither a URL nor a DSN (an address, "a@b.example") is kept as written.
func redactValue(v string) string {
	s := unescapeValue(v)
	if !isURLOrDSN(s) {
		return v
	}
	r := redactLoose(s)
	if at := strings.LastIndex(s, "@"); at >= 0 {
		prefix := ""
		if i := strings.Index(s[:at], "://"); i >= 0 && urlScheme.MatchString(s[:i]) {
			prefix = s[:i+3]
		}
		r = prefix + "xxxxx" + redactLoose(s[at:])
	}
	if r == s {
		return v
	}
	if s == v {
		return r
	}
	return url.QueryEscape(r)
}

// isURLOrDSN reports whether a query value is a URL ("scheme://...") or
// has user info ("user:pw@host", "user:pw@tcp(host)/db").
func isURLOrDSN(s string) bool {
	if strings.Contains(s, "://") {
		return true
	}
	at := strings.LastIndex(s, "@")
	return at >= 0 && strings.Contains(s[:at], ":")
}

// secretParam reports whether a query parameter of this name holds a
// secret rather than, say, the name of the variable that holds it.
func secretParam(name string) bool {
	name = strings.ToLower(name)
	if strings.HasSuffix(name, "_env") {
		return false
	}
	for _, w := range []string{"pass", "pwd", "secret", "token", "key", "auth", "credential"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
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
			return fmt.Errorf("transport: unknown parameter %q in %s URL %q (known: %s)", k, u.Scheme, RedactURL(u), strings.Join(known, ", "))
		}
		if len(q[k]) > 1 {
			return fmt.Errorf("transport: parameter %q given %d times in %s URL %q", k, len(q[k]), u.Scheme, RedactURL(u))
		}
	}
	return nil
}

package composite

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/mailspool/mailspool/internal/duration"
	"github.com/mailspool/mailspool/transport"
)

// Policy is how a composite picks a member.
type Policy string

// The policies.
const (
	// Failover sends through the first member that is up, in the order
	// written.
	Failover Policy = "failover"
	// RoundRobin spreads mail over the members in proportion to their
	// weights; a mail's retries go to the same member while it is up.
	RoundRobin Policy = "roundrobin"
)

// DefaultProbeAfter is how long a member stays down before one send
// probes it (probe=).
const DefaultProbeAfter = 30 * time.Second

// Spec is a parsed composite transport URL.
type Spec struct {
	Policy  Policy
	Members []Member
	// ProbeAfter is how long a member stays down before a single send
	// (the half-open probe) tries it again.
	ProbeAfter time.Duration
}

// Member is one transport of a composite.
type Member struct {
	// Name identifies the member in the health table, metrics, logs and
	// a mail's outcome: its URL's scheme and host (no user, password or
	// query), with "#2", "#3" added when two members would share one.
	Name string
	// URL is the member's transport URL as written.
	URL    string
	Weight int
}

// IsComposite reports whether raw is written as a composite transport
// (failover(...) or roundrobin(...)) rather than a transport URL.
func IsComposite(raw string) bool {
	_, _, ok := head(raw)
	return ok
}

var headRE = regexp.MustCompile(`^\s*([A-Za-z]+)\s*\(`)

func head(raw string) (name, rest string, ok bool) {
	m := headRE.FindStringSubmatchIndex(raw)
	if m == nil {
		return "", "", false
	}
	return strings.ToLower(raw[m[2]:m[3]]), raw[m[1]:], true
}

// memberStart is where a member URL starts after a separating comma.
var memberStart = regexp.MustCompile(`^\s*[A-Za-z][A-Za-z0-9+.-]*://`)

// nested finds a composite inside a member.
var nested = regexp.MustCompile(`(?i)(failover|roundrobin)\s*\(`)

// optionStart is where the options start after a ";".
var optionStart = regexp.MustCompile(`^\s*[a-z_]+\s*=`)

// Parse parses a composite transport:
//
//	failover(URL, URL, ...[; probe=30s])
//	roundrobin(URL, URL, ...[; weights=3,1][; probe=30s])
//
// Members are separated by a comma followed by the next URL's scheme
// ("smtp://", "ses://"), so commas inside a URL (a query value) are kept.
// Errors say what is wrong and never show a member's password.
func Parse(raw string) (Spec, error) {
	name, rest, ok := head(raw)
	if !ok {
		return Spec{}, fmt.Errorf("composite: %q is not failover(...) or roundrobin(...)", transport.Redact(raw))
	}
	sp := Spec{Policy: Policy(name), ProbeAfter: DefaultProbeAfter}
	if sp.Policy != Failover && sp.Policy != RoundRobin {
		return Spec{}, fmt.Errorf("composite: unknown policy %q (want failover(...) or roundrobin(...))", name)
	}
	rest = strings.TrimRightFunc(rest, isSpace)
	body, ok := strings.CutSuffix(rest, ")")
	if !ok {
		return Spec{}, fmt.Errorf("composite: %s(...) has no closing parenthesis at its end", name)
	}
	// Options: every ";" followed by "name=".
	var opts []string
	for {
		i := lastOptionSemicolon(body)
		if i < 0 {
			break
		}
		opts = append([]string{strings.TrimSpace(body[i+1:])}, opts...)
		body = body[:i]
	}
	urls, err := splitMembers(body)
	if err != nil {
		return Spec{}, fmt.Errorf("composite: %s(...): %w", name, err)
	}
	if len(urls) < 1 {
		return Spec{}, fmt.Errorf("composite: %s() has no member: give one or more transport URLs", name)
	}
	seen := map[string]int{}
	for _, u := range urls {
		if IsComposite(u) {
			return Spec{}, fmt.Errorf("composite: %s(...): a member is a transport URL, not another composite (%q)", name, transport.Redact(u))
		}
		n := memberName(u)
		seen[n]++
		if seen[n] > 1 {
			n += "#" + strconv.Itoa(seen[n])
		}
		sp.Members = append(sp.Members, Member{Name: n, URL: u, Weight: 1})
	}
	given := map[string]bool{}
	for _, o := range opts {
		k, v, _ := strings.Cut(o, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if given[k] {
			return Spec{}, fmt.Errorf("composite: %s(...): option %s given twice", name, k)
		}
		given[k] = true
		switch k {
		case "weights":
			if sp.Policy != RoundRobin {
				return Spec{}, fmt.Errorf("composite: failover(...) takes no weights (members are tried in the order written); roundrobin(...; weights=3,1) spreads mail")
			}
			ws := strings.Split(v, ",")
			if len(ws) != len(sp.Members) {
				return Spec{}, fmt.Errorf("composite: roundrobin(...): weights=%s gives %d weights for %d members", v, len(ws), len(sp.Members))
			}
			for i, w := range ws {
				n, err := strconv.Atoi(strings.TrimSpace(w))
				if err != nil || n < 1 || n > 1000 {
					return Spec{}, fmt.Errorf("composite: roundrobin(...): weight %q of member %d (%s) is not a whole number from 1 to 1000", strings.TrimSpace(w), i+1, sp.Members[i].Name)
				}
				sp.Members[i].Weight = n
			}
		case "probe":
			d, err := duration.Positive(v)
			if err != nil {
				return Spec{}, fmt.Errorf("composite: %s(...): probe: %w", name, err)
			}
			sp.ProbeAfter = d
		default:
			known := "probe"
			if sp.Policy == RoundRobin {
				known = "weights, probe"
			}
			return Spec{}, fmt.Errorf("composite: %s(...): unknown option %q (known: %s)", name, k, known)
		}
	}
	return sp, nil
}

func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }

// lastOptionSemicolon is the index of the last ";" of body that starts an
// option ("; weights=3,1") and is not followed by a member URL, or -1.
func lastOptionSemicolon(body string) int {
	for i := len(body) - 1; i >= 0; i-- {
		if body[i] == ';' && optionStart.MatchString(body[i+1:]) && !strings.Contains(body[i+1:], "://") {
			return i
		}
	}
	return -1
}

// splitMembers splits at each comma followed by a URL scheme.
func splitMembers(body string) ([]string, error) {
	var urls []string
	start := 0
	for i := 0; i < len(body); i++ {
		if body[i] == ',' && memberStart.MatchString(body[i+1:]) {
			urls = append(urls, body[start:i])
			start = i + 1
		}
	}
	urls = append(urls, body[start:])
	var out []string
	for i, u := range urls {
		u = strings.TrimSpace(u)
		if u == "" {
			if len(urls) == 1 {
				return nil, nil
			}
			return nil, fmt.Errorf("member %d is empty", i+1)
		}
		if strings.ContainsAny(u, " \t\r\n") || strings.HasSuffix(u, ",") || nested.MatchString(u) {
			return nil, fmt.Errorf("member %d (%q) is not one transport URL: members are transport URLs separated by commas (a URL holds no spaces, and a member is not itself a composite)", i+1, transport.Redact(u))
		}
		if !memberStart.MatchString(u) {
			return nil, fmt.Errorf("member %d (%q) is not a transport URL (scheme://...); members are separated by commas", i+1, transport.Redact(u))
		}
		out = append(out, u)
	}
	return out, nil
}

// memberName is scheme://host of a member URL, without user info. It is
// read from the URL as transport.Redact shows it, so that a password with
// a "/", "#" or "?" ("smtp://u:S3C/RET@h") is never taken for the host:
// Redact has already decided where the user info ends. The host keeps the
// spelling it was written with (Redact escapes a non-ASCII host), so that
// a member's name, the key of its health row, does not change.
func memberName(raw string) string {
	scheme, rest, _ := strings.Cut(raw, "://")
	_, shown, _ := strings.Cut(transport.Redact(raw), "://")
	host := hostOf(shown)
	if written := hostOf(rest); written != host {
		// Either Redact escaped a non-ASCII host, or it took everything
		// up to a later "@" for user info and written may be part of a
		// password. Take written only when it is host unescaped, which
		// shows nothing host does not.
		if u, err := url.PathUnescape(host); err == nil && u == written {
			host = written
		}
	}
	return strings.ToLower(scheme) + "://" + host
}

// hostOf is the host (and port) at the start of what follows a URL's
// "://": up to the first "/", "?" or "#", after the last "@" before it.
func hostOf(rest string) string {
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	return rest
}

// String writes sp back in the syntax Parse reads, each member redacted.
func (sp Spec) String() string {
	var b strings.Builder
	b.WriteString(string(sp.Policy))
	b.WriteString("(")
	for i, m := range sp.Members {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(transport.Redact(m.URL))
	}
	if sp.Policy == RoundRobin {
		b.WriteString("; weights=")
		for i, m := range sp.Members {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(strconv.Itoa(m.Weight))
		}
	}
	b.WriteString(")")
	return b.String()
}

package sendgrid

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sendgrid/rest"

	"github.com/mailspool/mailspool/classify"
	"github.com/mailspool/mailspool/transport"
)

// Limits on the Detail taken from an error body.
const (
	maxDetailMessages = 3
	maxDetailLen      = 300
)

// statusKinds are the SendGrid statuses whose meaning is known well enough
// to override classify's generic HTTP mapping.
var statusKinds = map[int]transport.Kind{
	http.StatusBadRequest:            transport.Permanent,  // the request or mail is invalid
	http.StatusRequestEntityTooLarge: transport.Permanent,  // over SendGrid's 30 MB limit
	http.StatusUnauthorized:          transport.Connection, // missing, wrong or revoked key
	http.StatusForbidden:             transport.Connection, // key scope, unverified sender, account
	http.StatusTooManyRequests:       transport.Temporary,
}

// outcome turns a SendGrid answer into Send's result: a Receipt for 2xx, a
// *transport.Error otherwise. key is removed from any text taken from the
// response; now is the clock X-RateLimit-Reset is measured against.
func outcome(resp *rest.Response, key string, now time.Time) (transport.Receipt, error) {
	h := http.Header(resp.Headers)
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return transport.Receipt{MessageID: h.Get("X-Message-Id")}, nil
	}
	te := statusError(resp.StatusCode, h, resp.Body)
	if k, ok := statusKinds[resp.StatusCode]; ok {
		te.Kind = k
	} else if resp.StatusCode >= 500 {
		te.Kind = transport.Temporary
	}
	if d := errorDetail(resp.Body); d != "" {
		te.Detail = d
	}
	if key != "" {
		te.Detail = strings.ReplaceAll(te.Detail, key, "xxxxx")
	}
	if te.RetryAfter == 0 && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		te.RetryAfter = retryAfter(h, now)
	}
	return transport.Receipt{}, te
}

// statusError is classify's reading of a non-2xx answer as a
// *transport.Error that outcome may refine.
func statusError(status int, h http.Header, body string) *transport.Error {
	err := classify.HTTP(status, h, []byte(body))
	var te *transport.Error
	if errors.As(err, &te) {
		c := *te
		return &c
	}
	// classify has no opinion (1xx, 3xx): the endpoint is not the API.
	return &transport.Error{Kind: transport.Connection, Code: status, Detail: "unexpected answer " + strconv.Itoa(status) + " from the endpoint", Err: err}
}

// retryAfter reads Retry-After, then X-RateLimit-Reset (a Unix time); 0
// when neither gives a future time.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if d := classify.RetryAfter(h.Get("Retry-After"), now); d > 0 {
		return d
	}
	reset, err := strconv.ParseInt(strings.TrimSpace(h.Get("X-RateLimit-Reset")), 10, 64)
	if err != nil {
		return 0
	}
	if d := time.Unix(reset, 0).Sub(now); d > 0 {
		return d.Round(time.Second)
	}
	return 0
}

// apiErrors is SendGrid's v3 error body.
type apiErrors struct {
	Errors []struct {
		Message string `json:"message"`
		Field   string `json:"field"`
	} `json:"errors"`
}

// errorDetail returns a short text from an error body: SendGrid's error
// messages (with their field) for a v3 JSON body, the title of an HTML page
// (a proxy's 413), else "".
func errorDetail(body string) string {
	var e apiErrors
	if json.Unmarshal([]byte(body), &e) == nil && len(e.Errors) > 0 {
		var parts []string
		for i, m := range e.Errors {
			if i == maxDetailMessages {
				parts = append(parts, "and "+strconv.Itoa(len(e.Errors)-i)+" more")
				break
			}
			p := m.Message
			if m.Field != "" {
				p += " (" + m.Field + ")"
			}
			parts = append(parts, p)
		}
		return clean(strings.Join(parts, "; "))
	}
	return clean(htmlTitle(body))
}

// htmlTitle returns the text of the first <title> element in s, or "".
func htmlTitle(s string) string {
	lower := strings.ToLower(s)
	start := strings.Index(lower, "<title>")
	if start < 0 {
		return ""
	}
	start += len("<title>")
	end := strings.Index(lower[start:], "</title>")
	if end < 0 {
		return ""
	}
	return s[start : start+end]
}

// clean collapses whitespace and control characters to single spaces and
// cuts s to maxDetailLen bytes on a rune boundary.
func clean(s string) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r)
	}), " ")
	if len(s) <= maxDetailLen {
		return s
	}
	cut := maxDetailLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

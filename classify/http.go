package classify

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/mailspool/mailspool/transport"
)

// HTTP classifies the response of a provider's HTTP API. A 2xx or 3xx status
// is nil; otherwise the result is a *transport.Error with Code = status and:
//
//	429                     Temporary, RetryAfter from Retry-After (seconds or
//	                        HTTP-date) or else X-RateLimit-Reset (Unix seconds)
//	5xx                     Temporary, RetryAfter from Retry-After if given
//	400 413 422             Permanent: the provider rejects this mail
//	401 402 403 404 405 407 Connection: the key, the account, the endpoint or
//	410 411 414 415 421 426 the request the adapter builds is wrong; the mail
//	431                     is fine
//	other 4xx (408 409 425) Temporary
//	anything else           Temporary (not a valid HTTP status)
//
// Detail is a short message from the body: "message" of a JSON object, the
// messages of its "errors" list, "message" of its "error" object (or
// "Message", "Errors", "Error"), or a plain-text body; an HTML body gives nothing. Without one,
// Detail is the status text ("Too Many Requests").
func HTTP(status int, header http.Header, body []byte) error {
	if status >= 200 && status < 400 {
		return nil
	}
	kind, scope, rule := httpKind(status)
	e := &transport.Error{Kind: kind, Code: status, Scope: scope, Rule: rule, Detail: bodyMessage(header, body)}
	if e.Detail == "" {
		e.Detail = http.StatusText(status)
	}
	if (scope == transport.ScopeMessage || scope == transport.ScopeLane) && httpSenderText.MatchString(strings.ToLower(e.Detail)) {
		// The provider refuses our sender, its identity or our account,
		// not this mail and not the key: retried and alerted on.
		e.Kind, e.Scope, e.Rule = transport.Connection, transport.ScopeSender, "http-sender"
	}
	now := time.Now()
	switch {
	case status == http.StatusTooManyRequests:
		e.RetryAfter = RetryAfter(header.Get("Retry-After"), now)
		if e.RetryAfter == 0 {
			e.RetryAfter = rateLimitReset(header.Get("X-RateLimit-Reset"), now)
		}
	case status >= 500:
		e.RetryAfter = RetryAfter(header.Get("Retry-After"), now)
	}
	return e
}

// httpKind is the Kind and Scope of a failing status, as tabled in
// [HTTP], and the name of the rule that decides it.
func httpKind(status int) (transport.Kind, transport.Scope, string) {
	switch status {
	case 400, 413, 422:
		return transport.Permanent, transport.ScopeMessage, "http-rejected"
	case 401, 402, 403, 404, 405, 407, 410, 411, 414, 415, 421, 426, 431:
		return transport.Connection, transport.ScopeLane, "http-setup"
	case 429:
		return transport.Temporary, transport.ScopeTransient, "http-429"
	}
	switch {
	case status >= 500 && status < 600:
		return transport.Temporary, transport.ScopeTransient, "http-5xx"
	case status >= 400 && status < 500:
		return transport.Temporary, transport.ScopeTransient, "http-4xx"
	}
	return transport.Temporary, transport.ScopeTransient, "http-invalid"
}

// httpSenderText matches an API's words about our sender, its identity,
// its domain or our account (SendGrid's "The from address does not match
// a verified Sender Identity", "from.email", Mailgun's "Domain not
// found", Postmark's "Sender signature not defined"): the mail is fine.
var httpSenderText = regexp.MustCompile(`sender|\bfrom\b|identity|not verified|unverified|domain (is )?not (found|verified|allowed|configured)|account|suspended|not (permitted|allowed) to send`)

// maxBody bounds how much of a body is parsed for a message.
const maxBody = 64 << 10

// bodyMessage returns a short message from an error response body, or "".
func bodyMessage(header http.Header, body []byte) string {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || len(body) > maxBody {
		return ""
	}
	media, _, _ := mime.ParseMediaType(header.Get("Content-Type"))
	switch {
	case strings.Contains(media, "html") || body[0] == '<':
		return ""
	case strings.Contains(media, "json") || body[0] == '{' || body[0] == '[':
		var v any
		if json.Unmarshal(body, &v) != nil {
			return ""
		}
		return cleanDetail(jsonMessage(v))
	case media == "" || media == "text/plain":
		return cleanDetail(string(body))
	}
	return ""
}

// jsonMessage finds the error message in a decoded JSON body:
// {"message": m}, {"errors": [{"message": m}, ...]}, {"error": {"message": m}}
// or {"error": m}.
func jsonMessage(v any) string {
	obj, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	if m, ok := field(obj, "message").(string); ok {
		return m
	}
	if list, ok := field(obj, "errors").([]any); ok {
		var msgs []string
		for _, item := range list {
			if m := jsonMessage(item); m != "" {
				msgs = append(msgs, m)
			}
		}
		return strings.Join(msgs, "; ")
	}
	switch e := field(obj, "error").(type) {
	case string:
		return e
	case map[string]any:
		return jsonMessage(e)
	}
	return ""
}

// field returns obj[key] or else obj[Key]: AWS writes "Message", most
// others "message".
func field(obj map[string]any, key string) any {
	if v, ok := obj[key]; ok {
		return v
	}
	return obj[strings.ToUpper(key[:1])+key[1:]]
}

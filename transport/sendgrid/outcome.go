package sendgrid

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"unicode"

	"github.com/sendgrid/rest"

	"github.com/mailspool/mailspool/internal/textclip"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/internal/httpapi"
)

// Limits on the Detail taken from an error body.
const (
	maxDetailMessages = 3
	maxDetailLen      = 300
)

// outcome turns a SendGrid answer into Send's result: a Receipt for 2xx, a
// *transport.Error otherwise. httpapi.StatusError maps the status and the
// retry hints (Retry-After, X-RateLimit-Reset); outcome adds SendGrid's error
// messages as Detail and removes key from any text taken from the response.
func outcome(resp *rest.Response, key string) (transport.Receipt, error) {
	h := http.Header(resp.Headers)
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return transport.Receipt{MessageID: h.Get("X-Message-Id")}, nil
	}
	te := httpapi.StatusError(resp.StatusCode, h, []byte(resp.Body))
	if d := errorDetail(resp.Body); d != "" {
		te.Detail = d
	}
	if key != "" {
		te.Detail = strings.ReplaceAll(te.Detail, key, "xxxxx")
	}
	return transport.Receipt{}, te
}

// Classify classifies an error answer of SendGrid's v3 mail send API, as
// Send does, from its HTTP status and body. It is for explaining a recorded
// answer (the mailspool classify command); retry hints from headers are not
// known.
func Classify(status int, body string) error {
	_, err := outcome(&rest.Response{StatusCode: status, Body: body, Headers: map[string][]string{}}, "")
	return err
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
	// Lower ASCII only, so that indexes into lower are indexes into s.
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	lower := string(b)
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

// clean replaces invalid UTF-8, collapses whitespace and control characters
// to single spaces and clips s to maxDetailLen bytes (textclip.Clip).
func clean(s string) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r)
	}), " ")
	return textclip.Clip(strings.ToValidUTF8(s, "\uFFFD"), maxDetailLen)
}

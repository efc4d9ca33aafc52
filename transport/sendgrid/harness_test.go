package sendgrid_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/mailspool/mailspool/conformance"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/internal/httpbackend"
	"github.com/mailspool/mailspool/transport/sendgrid"
)

// harness is a fake SendGrid v3 API on loopback: it checks each request the
// way SendGrid would (method, path, bearer key, JSON shape) and answers as
// the scenario says.
type harness struct {
	*httpbackend.Backend
	key string
}

func newHarness(_ context.Context, t *testing.T) (conformance.Harness, error) {
	h := &harness{key: "SG." + randomHex(8) + "." + randomHex(16)}
	h.Backend = httpbackend.New(t, httpbackend.Wire{
		Provider:   "SendGrid",
		ReadFunc:   h.read,
		AcceptFunc: writeAccepted,
		ErrorFunc:  writeScriptedError,
	})
	return h, nil
}

func (h *harness) Open(ctx context.Context, s conformance.Scenario) (transport.Transport, error) {
	endpoint, err := h.Endpoint(s)
	if err != nil {
		return nil, err
	}
	u := &url.URL{
		Scheme:   sendgrid.Scheme,
		User:     url.UserPassword("apikey", h.key),
		Host:     "default",
		RawQuery: url.Values{"endpoint": {endpoint}, "timeout": {"10s"}}.Encode(),
	}
	return sendgrid.URLOpener{}.OpenTransportURL(ctx, u)
}

func (h *harness) Secret() string { return h.key }

// read checks a v3 mail/send request and returns the mail it describes.
func (h *harness) read(r *http.Request) (conformance.Received, error) {
	req, problem := h.check(r)
	if problem != "" {
		return conformance.Received{}, errors.New(problem)
	}
	return toReceived(req), nil
}

// writeAccepted answers like a successful mail/send.
func writeAccepted(w http.ResponseWriter) {
	w.Header().Set("X-Message-Id", "sg-"+randomHex(11))
	w.WriteHeader(http.StatusAccepted)
}

// scriptedMessages are SendGrid's error messages for the statuses the
// harness answers with.
var scriptedMessages = map[int]string{
	http.StatusUnauthorized:        "The provided authorization grant is invalid, expired, or revoked",
	http.StatusTooManyRequests:     "too many requests",
	http.StatusInternalServerError: "internal error",
}

// writeScriptedError answers with SendGrid's error for status; a non-empty
// detail replaces SendGrid's message.
func writeScriptedError(w http.ResponseWriter, status int, detail string) {
	if detail == "" {
		detail = scriptedMessages[status]
	}
	writeErrors(w, status, detail)
}

// check returns the decoded body, or what SendGrid would reject about r.
func (h *harness) check(r *http.Request) (*v3Request, string) {
	switch {
	case r.Method != http.MethodPost:
		return nil, "method " + r.Method + ", want POST"
	case r.URL.Path != "/v3/mail/send":
		return nil, "path " + r.URL.Path + ", want /v3/mail/send"
	case r.Header.Get("Authorization") != "Bearer "+h.key:
		return nil, "Authorization is not \"Bearer\" and the harness key"
	case r.Header.Get("Content-Type") != "application/json":
		return nil, "Content-Type " + r.Header.Get("Content-Type") + ", want application/json"
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, "read body: " + err.Error()
	}
	var req v3Request
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, "body is not JSON: " + err.Error()
	}
	switch {
	case len(req.Personalizations) != 1 || len(req.Personalizations[0].To) != 1:
		return nil, "want exactly one personalization with one to"
	case req.From.Email == "":
		return nil, "from.email is missing"
	case req.Subject == "" && req.Personalizations[0].Subject == "":
		return nil, "subject is missing"
	case len(req.Content) == 0:
		return nil, "content is missing"
	}
	for i, c := range req.Content {
		if c.Type != "text/plain" && c.Type != "text/html" {
			return nil, "content type " + c.Type + " is not text/plain or text/html"
		}
		if c.Type == "text/plain" && i != 0 {
			return nil, "text/plain content must come first"
		}
	}
	return &req, ""
}

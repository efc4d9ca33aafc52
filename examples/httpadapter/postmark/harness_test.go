package postmark_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"net/textproto"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"example.com/httpadapter/postmark"
	"github.com/mailspool/mailspool/conformance"
	"github.com/mailspool/mailspool/transport"
)

// backend is a fake Postmark API on loopback: it checks each POST /email
// as Postmark would (method, path, token header, JSON shape) and answers
// as the scenario says, with Postmark's documented bodies.
type backend struct {
	t        *testing.T
	token    string
	env      string
	scenario conformance.Scenario

	mu       sync.Mutex
	attempts int
	received []conformance.Received
	stop     chan struct{}
	once     sync.Once
}

func newBackend(_ context.Context, t *testing.T) (conformance.Harness, error) {
	b := &backend{t: t, token: "pm-" + rand.Text(), env: "POSTMARK_TEST_TOKEN_" + strings.ToUpper(rand.Text()[:8]), stop: make(chan struct{})}
	// A variable of its own per harness: the suite's cases run in parallel.
	os.Setenv(b.env, b.token)
	t.Cleanup(func() { os.Unsetenv(b.env) })
	return b, nil
}

func (b *backend) Open(ctx context.Context, s conformance.Scenario) (transport.Transport, error) {
	if strings.HasPrefix(string(s), "smtp-") {
		return nil, fmt.Errorf("%w: Postmark's API answers in HTTP, not SMTP replies", conformance.ErrUnsupported)
	}
	b.scenario = s
	var endpoint string
	switch s {
	case conformance.Refused:
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		endpoint = "http://" + l.Addr().String()
		l.Close()
	case conformance.Hang:
		// Postmark is HTTPS: a server that accepts the connection and never
		// answers leaves the client in the TLS handshake, before any of the
		// request is written. Each connection is an attempt.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		b.t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				b.mu.Lock()
				b.attempts++
				b.mu.Unlock()
				b.t.Cleanup(func() { c.Close() })
			}
		}()
		endpoint = "https://" + l.Addr().String()
	case conformance.TLSFailure:
		srv := httptest.NewTLSServer(http.HandlerFunc(b.serve)) // its certificate is not trusted
		b.t.Cleanup(srv.Close)
		endpoint = srv.URL
	default:
		srv := httptest.NewServer(http.HandlerFunc(b.serve))
		b.t.Cleanup(srv.Close)
		b.t.Cleanup(func() { b.once.Do(func() { close(b.stop) }) })
		endpoint = srv.URL
	}
	u := &url.URL{Scheme: postmark.Scheme, RawQuery: url.Values{"token_env": {b.env}, "endpoint": {endpoint}, "timeout": {"10s"}}.Encode()}
	return postmark.URLOpener{}.OpenTransportURL(ctx, u)
}

func (b *backend) serve(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	b.attempts++
	b.mu.Unlock()
	answer := func(status, code int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]any{"ErrorCode": code, "Message": msg})
	}
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/email":
		answer(http.StatusNotFound, 0, "not found: "+r.Method+" "+r.URL.Path)
		return
	case r.Header.Get("X-Postmark-Server-Token") != b.token || b.scenario == conformance.HTTP401:
		answer(http.StatusUnauthorized, 10, "No Account or Server API tokens were supplied in the HTTP headers. Please add a header for either X-Postmark-Server-Token or X-Postmark-Account-Token.")
		return
	case r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Accept") != "application/json":
		answer(http.StatusUnprocessableEntity, 300, "Invalid email request: want JSON")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	switch b.scenario {
	case conformance.StallAfterData:
		// The whole body was read (above): no answer until the client
		// gives up.
		select {
		case <-r.Context().Done():
		case <-b.stop:
		}
		return
	case conformance.HTTP429:
		w.Header().Set("Retry-After", "7")
		answer(http.StatusTooManyRequests, 0, "Rate limit exceeded")
		return
	case conformance.HTTP500:
		answer(http.StatusInternalServerError, 0, "Internal server error")
		return
	}
	rec, problem := decode(body)
	if problem != "" {
		answer(http.StatusUnprocessableEntity, 300, "Invalid email request: "+problem)
		return
	}
	id := strings.ToLower(rand.Text())
	b.mu.Lock()
	b.received = append(b.received, rec)
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"To": rec.To[0], "SubmittedAt": "2026-12-06T04:00:00Z", "MessageID": id, "ErrorCode": 0, "Message": "OK"})
}

// decode reads a POST /email body as the mail Postmark would send.
func decode(body []byte) (conformance.Received, string) {
	var req struct {
		From, To, ReplyTo, Subject, TextBody, HtmlBody, MessageStream string
		Headers                                                       []struct{ Name, Value string }
		Attachments                                                   []struct{ Name, Content, ContentType, ContentID string }
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return conformance.Received{}, "not JSON: " + err.Error()
	}
	from, err := mail.ParseAddress(req.From)
	if err != nil {
		return conformance.Received{}, "From: " + err.Error()
	}
	to, err := mail.ParseAddress(req.To)
	if err != nil {
		return conformance.Received{}, "To: " + err.Error()
	}
	if req.Subject == "" || (req.TextBody == "" && req.HtmlBody == "") || req.MessageStream == "" {
		return conformance.Received{}, "Subject, a body and MessageStream are required"
	}
	rec := conformance.Received{From: from.Address, FromName: from.Name, To: []string{to.Address}, ToName: to.Name, Subject: req.Subject,
		Text: req.TextBody, HTML: req.HtmlBody, Header: textproto.MIMEHeader{}}
	for _, h := range req.Headers {
		rec.Header.Add(h.Name, h.Value)
	}
	if req.ReplyTo != "" {
		rec.Header.Set("Reply-To", req.ReplyTo)
	}
	for _, a := range req.Attachments {
		data, err := base64.StdEncoding.DecodeString(a.Content)
		if err != nil {
			return conformance.Received{}, "attachment " + a.Name + ": " + err.Error()
		}
		cid, inline := strings.CutPrefix(a.ContentID, "cid:")
		rec.Attachments = append(rec.Attachments, transport.Attachment{Filename: a.Name, ContentType: a.ContentType, Data: data, Inline: inline, ContentID: cid})
	}
	return rec, ""
}

func (b *backend) Attempts() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.attempts
}

func (b *backend) Received() ([]conformance.Received, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]conformance.Received(nil), b.received...), nil
}

func (b *backend) Secret() string { return b.token }
func (b *backend) Close() error   { b.once.Do(func() { close(b.stop) }); return nil }

// TestConformance runs mailspool's conformance suite from outside its
// module.
func TestConformance(t *testing.T) {
	conformance.RunTransportTests(t, newBackend)
}

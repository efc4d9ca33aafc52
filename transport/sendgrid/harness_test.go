package sendgrid_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"net/textproto"
	"net/url"
	"sync"
	"testing"

	"github.com/mailspool/mailspool/conformance"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/sendgrid"
)

// v3Request is the part of a v3 mail/send body the harness reads, written
// from SendGrid's API reference rather than the SDK's types.
type v3Request struct {
	Personalizations []struct {
		To []struct {
			Email string `json:"email"`
			Name  string `json:"name"`
		} `json:"to"`
		Subject string `json:"subject"`
	} `json:"personalizations"`
	From struct {
		Email string `json:"email"`
		Name  string `json:"name"`
	} `json:"from"`
	ReplyTo *struct {
		Email string `json:"email"`
		Name  string `json:"name"`
	} `json:"reply_to"`
	Subject string `json:"subject"`
	Content []struct {
		Type  string `json:"type"`
		Value string `json:"value"`
	} `json:"content"`
	Headers map[string]string `json:"headers"`
}

// harness is a fake SendGrid v3 API on loopback: it checks each request the
// way SendGrid would (method, path, bearer key, JSON shape) and answers as
// the scenario says.
type harness struct {
	t   *testing.T
	key string

	mu       sync.Mutex
	attempts int
	received []conformance.Received

	stop    chan struct{} // closed by Close: releases stalled handlers and held conns
	servers []*httptest.Server
	ln      net.Listener
	conns   sync.WaitGroup
}

func newHarness(_ context.Context, t *testing.T) (conformance.Harness, error) {
	return &harness{t: t, key: "SG." + randomHex(8) + "." + randomHex(16), stop: make(chan struct{})}, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (h *harness) Open(ctx context.Context, s conformance.Scenario) (transport.Transport, error) {
	if s.Reply() != "" {
		return nil, fmt.Errorf("%w: SendGrid answers over HTTP, no SMTP reply %q can be scripted", conformance.ErrUnsupported, s)
	}
	var endpoint string
	switch s {
	case conformance.Refused:
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		endpoint = "http://" + ln.Addr().String()
		if err := ln.Close(); err != nil {
			return nil, err
		}
	case conformance.Hang:
		// The real API is HTTPS: a server that accepts the connection and
		// never answers stalls the TLS handshake, before any request byte.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		h.ln = ln
		go h.acceptAndHold()
		endpoint = "https://" + ln.Addr().String()
	case conformance.TLSFailure:
		srv := httptest.NewUnstartedServer(h.handler(s))
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshakes are the point
		srv.StartTLS()
		h.servers = append(h.servers, srv)
		endpoint = srv.URL
	default:
		srv := httptest.NewServer(h.handler(s))
		h.servers = append(h.servers, srv)
		endpoint = srv.URL
	}
	u := &url.URL{
		Scheme:   sendgrid.Scheme,
		User:     url.UserPassword("apikey", h.key),
		Host:     "default",
		RawQuery: url.Values{"endpoint": {endpoint}, "timeout": {"10s"}}.Encode(),
	}
	return sendgrid.URLOpener{}.OpenTransportURL(ctx, u)
}

// acceptAndHold accepts connections, counts each as an attempt, and never
// reads or answers until Close.
func (h *harness) acceptAndHold() {
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		h.mu.Lock()
		h.attempts++
		h.mu.Unlock()
		h.conns.Add(1)
		go func() {
			defer h.conns.Done()
			<-h.stop
			_ = c.Close()
		}()
	}
}

func (h *harness) handler(s conformance.Scenario) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.attempts++
		h.mu.Unlock()
		req, problem := h.check(r)
		if problem != "" {
			h.t.Errorf("sendgrid harness: bad request: %s", problem)
			writeErrors(w, http.StatusBadRequest, problem)
			return
		}
		switch s {
		case conformance.Accept:
			h.mu.Lock()
			h.received = append(h.received, toReceived(req))
			h.mu.Unlock()
			w.Header().Set("X-Message-Id", "sg-"+randomHex(11))
			w.WriteHeader(http.StatusAccepted)
		case conformance.StallAfterData:
			select {
			case <-r.Context().Done():
			case <-h.stop:
			}
		case conformance.HTTP429:
			w.Header().Set("Retry-After", fmt.Sprint(int(conformance.RetryAfter429.Seconds())))
			writeErrors(w, http.StatusTooManyRequests, "too many requests")
		case conformance.HTTP401:
			writeErrors(w, http.StatusUnauthorized, "The provided authorization grant is invalid, expired, or revoked")
		case conformance.HTTP500:
			writeErrors(w, http.StatusInternalServerError, "internal error")
		default:
			h.t.Errorf("sendgrid harness: no answer scripted for scenario %q", s)
			writeErrors(w, http.StatusNotImplemented, "harness: scenario not scripted")
		}
	})
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

func toReceived(req *v3Request) conformance.Received {
	p := req.Personalizations[0]
	got := conformance.Received{
		From:     req.From.Email,
		FromName: req.From.Name,
		ToName:   p.To[0].Name,
		Subject:  req.Subject,
		Header:   textproto.MIMEHeader{},
	}
	if p.Subject != "" {
		got.Subject = p.Subject
	}
	for _, to := range p.To {
		got.To = append(got.To, to.Email)
	}
	for _, c := range req.Content {
		switch c.Type {
		case "text/plain":
			got.Text = c.Value
		case "text/html":
			got.HTML = c.Value
		}
	}
	for k, v := range req.Headers {
		got.Header.Add(k, v)
	}
	if req.ReplyTo != nil {
		got.Header.Set("Reply-To", (&mail.Address{Name: req.ReplyTo.Name, Address: req.ReplyTo.Email}).String())
	}
	return got
}

// writeErrors answers with SendGrid's v3 error body.
func writeErrors(w http.ResponseWriter, status int, messages ...string) {
	type apiError struct {
		Message string  `json:"message"`
		Field   *string `json:"field"`
		Help    *string `json:"help"`
	}
	var body struct {
		Errors []apiError `json:"errors"`
	}
	for _, m := range messages {
		body.Errors = append(body.Errors, apiError{Message: m})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func (h *harness) Attempts() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.attempts
}

func (h *harness) Received() ([]conformance.Received, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]conformance.Received(nil), h.received...), nil
}

func (h *harness) Secret() string { return h.key }

func (h *harness) Close() error {
	select {
	case <-h.stop:
		return nil
	default:
	}
	close(h.stop)
	for _, srv := range h.servers {
		srv.Close()
	}
	if h.ln == nil {
		return nil
	}
	err := h.ln.Close()
	h.conns.Wait()
	return err
}

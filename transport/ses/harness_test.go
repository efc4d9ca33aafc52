package ses_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/mailspool/mailspool/conformance"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/ses"
)

// Names the harness gives the transport and checks on every request.
const (
	harnessRegion  = "eu-west-1"
	harnessConfSet = "mailspool-conformance"
)

// harness is a conformance.Harness over a fake SES v2 API on loopback.
type harness struct {
	t      *testing.T
	keyID  string
	secret string

	mu       sync.Mutex
	attempts int
	received []conformance.Received

	stop    chan struct{} // closed by Close: releases stalled handlers and held conns
	servers []*httptest.Server
	ln      net.Listener
	conns   sync.WaitGroup
}

func newHarness(_ context.Context, t *testing.T) (conformance.Harness, error) {
	return &harness{
		t:      t,
		keyID:  "AKIA" + strings.ToUpper(randomHex(8)),
		secret: randomHex(20),
		stop:   make(chan struct{}),
	}, nil
}

func (h *harness) Open(ctx context.Context, s conformance.Scenario) (transport.Transport, error) {
	if s.Reply() != "" {
		return nil, fmt.Errorf("%w: SES answers over HTTP with error codes, it sends no SMTP reply like %q", conformance.ErrUnsupported, s.Reply())
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
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		h.ln = ln
		go h.acceptAndHold()
		// SES is HTTPS: a server that accepts the connection and never
		// answers leaves the client in the TLS handshake, before any of the
		// request is written. (Over plain HTTP the request would already sit
		// in the socket buffers, which a client cannot tell from a stall
		// after the whole body: MaybeDelivered.)
		endpoint = "https://" + ln.Addr().String()
	case conformance.TLSFailure:
		// The transport does not trust the test server's certificate.
		srv := httptest.NewTLSServer(h.handler(s))
		h.servers = append(h.servers, srv)
		endpoint = srv.URL
	default:
		srv := httptest.NewServer(h.handler(s))
		h.servers = append(h.servers, srv)
		endpoint = srv.URL
	}
	u := &url.URL{
		Scheme: ses.Scheme,
		User:   url.UserPassword(h.keyID, h.secret),
		Host:   "default",
		RawQuery: url.Values{
			"region":            {harnessRegion},
			"configuration_set": {harnessConfSet},
			"endpoint":          {endpoint},
			"timeout":           {"10s"},
		}.Encode(),
	}
	return ses.URLOpener{}.OpenTransportURL(ctx, u)
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
		req, problem := readSendEmail(r) // reads the whole body
		if problem == "" {
			problem = h.check(req)
		}
		if problem != "" {
			h.t.Errorf("ses harness: bad request: %s", problem)
			writeSESError(w, http.StatusBadRequest, "BadRequestException", "harness: "+problem)
			return
		}
		switch s {
		case conformance.Accept:
			got, err := conformance.ParseMIME(req.Content.Raw.Data)
			if err != nil {
				h.t.Errorf("ses harness: Content.Raw is not a MIME message: %v", err)
				writeSESError(w, http.StatusBadRequest, "BadRequestException", "harness: bad MIME")
				return
			}
			got.To = req.Destination.ToAddresses // the envelope, as SES delivers it
			h.mu.Lock()
			h.received = append(h.received, got)
			h.mu.Unlock()
			writeMessageID(w, newMessageID())
		case conformance.StallAfterData:
			select {
			case <-r.Context().Done():
			case <-h.stop:
			}
		case conformance.HTTP429:
			w.Header().Set("Retry-After", fmt.Sprint(int(conformance.RetryAfter429.Seconds())))
			writeSESError(w, http.StatusTooManyRequests, "TooManyRequestsException", "Too many requests.")
		case conformance.HTTP401:
			writeSESError(w, http.StatusUnauthorized, "UnrecognizedClientException", "The security token included in the request is invalid.")
		case conformance.HTTP500:
			writeSESError(w, http.StatusInternalServerError, "InternalFailure", "The request processing has failed because of an unknown error, exception or failure.")
		default:
			h.t.Errorf("ses harness: no answer scripted for scenario %q", s)
			writeSESError(w, http.StatusNotImplemented, "InternalFailure", "harness: scenario not scripted")
		}
	})
}

// check returns what is wrong with a request the transport sent, or "".
func (h *harness) check(req *sendEmailRequest) string {
	switch {
	case req.AccessKeyID != h.keyID:
		return "signed with access key " + req.AccessKeyID + ", want the one from the URL"
	case req.Region != harnessRegion:
		return "signed for region " + req.Region + ", want " + harnessRegion
	case req.ConfigurationSetName != harnessConfSet:
		return fmt.Sprintf("ConfigurationSetName %q, want %q", req.ConfigurationSetName, harnessConfSet)
	case req.FromEmailAddress == "":
		return "FromEmailAddress is missing"
	}
	return ""
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

func (h *harness) Secret() string { return h.secret }

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

// Package httpbackend is test support for the adapters that send over an
// HTTP API: a Backend makes an httptest fake of the provider's API answer
// the conformance scenarios, counts attempts and records what it accepted.
// An adapter's harness supplies only the provider's wire format (a Wire)
// and builds its transport's URL around [Backend.Endpoint].
package httpbackend

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/mailspool/mailspool/conformance"
)

// Wire is a provider's wire format: how its API reads a send request and
// how it answers one.
type Wire struct {
	// Provider names the API in skip reasons and test errors, e.g. "SES".
	Provider string
	// ReadFunc checks a send request the way the provider would and returns
	// the mail as the provider would deliver it, or an error saying what
	// the provider would reject. The Backend reads whatever of the body
	// ReadFunc leaves.
	ReadFunc func(r *http.Request) (conformance.Received, error)
	// AcceptFunc answers a send the provider accepted.
	AcceptFunc func(w http.ResponseWriter)
	// ErrorFunc answers with the provider's error for an HTTP status: 429,
	// 401 or 500 for the scenarios of those numbers, with detail "" (write
	// the provider's own words); 400 for a request ReadFunc rejected and
	// 501 for a scenario the Backend cannot script, with detail saying why.
	// The Backend has set Retry-After for a 429.
	ErrorFunc func(w http.ResponseWriter, status int, detail string)
}

// Backend serves the conformance scenarios for one harness. It implements
// the Attempts, Received and Close methods of [conformance.Harness], so a
// harness that embeds it adds only Open and Secret.
type Backend struct {
	t    *testing.T
	wire Wire

	mu        sync.Mutex
	attempts  int
	received  []conformance.Received
	servers   []*httptest.Server
	listeners []net.Listener

	stop      chan struct{} // closed by Close: releases stalled handlers and held conns
	conns     sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// New returns a Backend that speaks wire and reports a request that wire
// rejects as an error of t.
func New(t *testing.T, wire Wire) *Backend {
	return &Backend{t: t, wire: wire, stop: make(chan struct{})}
}

// Endpoint returns the base URL of an API that answers every request as s
// says, to be given to the transport as its endpoint; the API lives until
// Close. For an SMTP scenario it returns an error wrapping
// [conformance.ErrUnsupported]. Hang is an https URL whose listener
// accepts connections (each one an attempt) and never answers the TLS
// handshake, so no byte of a request is written; Refused is a closed
// port; TLSFailure is a TLS server whose certificate the transport does
// not trust; StallAfterData reads the whole request and answers only when
// the request is cancelled or the Backend closed.
func (b *Backend) Endpoint(s conformance.Scenario) (string, error) {
	if s.Reply() != "" {
		return "", fmt.Errorf("%w: %s answers over HTTP, it sends no SMTP reply like %q", conformance.ErrUnsupported, b.wire.Provider, s.Reply())
	}
	switch s {
	case conformance.Refused:
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		endpoint := "http://" + ln.Addr().String()
		return endpoint, ln.Close()
	case conformance.Hang:
		// The real APIs are HTTPS: a server that accepts the connection
		// and never answers leaves the client in the TLS handshake, before
		// any of the request is written. (Over plain HTTP the request would
		// already sit in the socket buffers, which a client cannot tell
		// from a stall after the whole body: MaybeDelivered.)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		b.mu.Lock()
		b.listeners = append(b.listeners, ln)
		b.mu.Unlock()
		b.conns.Add(1)
		go b.acceptAndHold(ln)
		return "https://" + ln.Addr().String(), nil
	case conformance.TLSFailure:
		srv := httptest.NewUnstartedServer(b.handler(s))
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshakes are the point
		srv.StartTLS()
		b.addServer(srv)
		return srv.URL, nil
	default:
		srv := httptest.NewServer(b.handler(s))
		b.addServer(srv)
		return srv.URL, nil
	}
}

func (b *Backend) addServer(srv *httptest.Server) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.servers = append(b.servers, srv)
}

func (b *Backend) countAttempt() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.attempts++
}

// acceptAndHold accepts connections on ln, counts each as an attempt, and
// never reads or answers until Close. It holds one count of b.conns, so
// the counts it adds always happen before Close's Wait can return.
func (b *Backend) acceptAndHold(ln net.Listener) {
	defer b.conns.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		b.countAttempt()
		b.conns.Add(1)
		go func() {
			defer b.conns.Done()
			<-b.stop
			_ = c.Close()
		}()
	}
}

func (b *Backend) handler(s conformance.Scenario) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.countAttempt()
		got, err := b.wire.ReadFunc(r)
		_, _ = io.Copy(io.Discard, r.Body) // the whole request has arrived
		if err != nil {
			b.t.Errorf("%s harness: bad request: %v", b.wire.Provider, err)
			b.wire.ErrorFunc(w, http.StatusBadRequest, "harness: "+err.Error())
			return
		}
		switch s {
		case conformance.Accept:
			b.mu.Lock()
			b.received = append(b.received, got)
			b.mu.Unlock()
			b.wire.AcceptFunc(w)
		case conformance.StallAfterData:
			select {
			case <-r.Context().Done():
			case <-b.stop:
			}
		case conformance.HTTP429:
			w.Header().Set("Retry-After", fmt.Sprint(int(conformance.RetryAfter429.Seconds())))
			b.wire.ErrorFunc(w, http.StatusTooManyRequests, "")
		case conformance.HTTP401:
			b.wire.ErrorFunc(w, http.StatusUnauthorized, "")
		case conformance.HTTP500:
			b.wire.ErrorFunc(w, http.StatusInternalServerError, "")
		default:
			b.t.Errorf("%s harness: no answer scripted for scenario %q", b.wire.Provider, s)
			b.wire.ErrorFunc(w, http.StatusNotImplemented, "harness: scenario not scripted")
		}
	})
}

// Attempts returns how many send requests reached the API, counting each
// connection to a Hang endpoint as one.
func (b *Backend) Attempts() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.attempts
}

// Received returns the mails the API accepted, as ReadFunc returned them.
// Its error is always nil.
func (b *Backend) Received() ([]conformance.Received, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]conformance.Received(nil), b.received...), nil
}

// Close releases stalled requests and held connections, stops every
// server and listener, and waits for them. It may be called more than
// once; later calls return what the first returned.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		close(b.stop)
		b.mu.Lock()
		servers, listeners := b.servers, b.listeners
		b.mu.Unlock()
		for _, srv := range servers {
			srv.Close() // waits for the handlers, which take b.mu
		}
		for _, ln := range listeners {
			if err := ln.Close(); err != nil && b.closeErr == nil {
				b.closeErr = err
			}
		}
		b.conns.Wait()
	})
	return b.closeErr
}

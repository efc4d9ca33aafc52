package faultsuite

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	gosmtp "github.com/emersion/go-smtp"
)

// provider is an in-process SMTP server standing in for the mail provider.
// It accepts every mail and counts deliveries by Message-ID. A delivery is
// counted once the server has taken the data and decided to answer 250,
// even if the client is gone by the time the answer is written: a real
// provider that queued the mail delivers it.
type provider struct {
	addr string

	mu        sync.Mutex
	stall     time.Duration  // wait before answering the DATA terminator
	delivered map[string]int // Message-ID (without <>) -> deliveries
	total     int
	inFlight  int // DATA bodies read and not yet answered
	srv       *gosmtp.Server
}

// startProvider starts a provider on 127.0.0.1 until the test ends.
func startProvider(t testing.TB) *provider {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &provider{addr: ln.Addr().String(), delivered: map[string]int{}}
	p.srv = gosmtp.NewServer(p)
	p.srv.Domain = "mx.test"
	p.srv.ErrorLog = log.New(io.Discard, "", 0)
	p.srv.AllowInsecureAuth = true
	p.srv.ReadTimeout = time.Minute
	p.srv.WriteTimeout = time.Minute
	p.srv.MaxRecipients = 10
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = p.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		_ = p.srv.Close()
		<-served
	})
	return p
}

// url is the transport URL of the provider (no TLS: it is on loopback).
func (p *provider) url() string { return "smtp://" + p.addr + "?tls=none" }

// setStall makes the provider wait d before answering each mail's data.
func (p *provider) setStall(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stall = d
}

// deliveries returns a copy of the deliveries per Message-ID.
func (p *provider) deliveries() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[string]int, len(p.delivered))
	for k, v := range p.delivered {
		m[k] = v
	}
	return m
}

// count returns the deliveries so far, duplicates included.
func (p *provider) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

// stalled returns how many mails the provider has read and not yet
// answered.
func (p *provider) stalled() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inFlight
}

// NewSession implements gosmtp.Backend.
func (p *provider) NewSession(*gosmtp.Conn) (gosmtp.Session, error) {
	return &providerSession{p: p}, nil
}

type providerSession struct{ p *provider }

func (s *providerSession) Mail(string, *gosmtp.MailOptions) error { return nil }
func (s *providerSession) Rcpt(string, *gosmtp.RcptOptions) error { return nil }
func (s *providerSession) Reset()                                 {}
func (s *providerSession) Logout() error                          { return nil }

func (s *providerSession) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return &gosmtp.SMTPError{Code: 554, EnhancedCode: gosmtp.EnhancedCode{5, 6, 0}, Message: "unparsable message"}
	}
	id := normalizeID(msg.Header.Get("Message-Id"))
	if id == "" {
		return errors.New("no Message-ID")
	}
	s.p.mu.Lock()
	stall := s.p.stall
	s.p.delivered[id]++
	s.p.total++
	s.p.inFlight++
	s.p.mu.Unlock()
	time.Sleep(stall)
	s.p.mu.Lock()
	s.p.inFlight--
	n := s.p.total
	s.p.mu.Unlock()
	return &gosmtp.SMTPError{Code: 250, EnhancedCode: gosmtp.EnhancedCode{2, 0, 0}, Message: fmt.Sprintf("OK: queued as Q%d", n)}
}

// normalizeID is a Message-ID without angle brackets or spaces, as the
// queue's message_id column and the header are compared.
func normalizeID(id string) string {
	return strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(id), "<"), ">")
}

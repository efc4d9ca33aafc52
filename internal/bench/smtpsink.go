package bench

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/mail"
	"strings"
	"sync"
	"time"

	gosmtp "github.com/emersion/go-smtp"

	"github.com/mailspool/mailspool/internal/netdelay"
	"github.com/mailspool/mailspool/transport"
)

// smtpSink is an SMTP server on loopback that accepts every mail and
// reports its Message-ID header to a tracker: the delivery count of an
// SMTP run is what a real server received. With a delay its replies reach
// the client that much later, as from a relay a round trip away.
type smtpSink struct {
	srv  *gosmtp.Server
	ln   net.Listener
	done chan struct{}
	tr   *tracker

	mu    sync.Mutex
	conns int
}

func startSMTPSink(tr *tracker, delay time.Duration) (*smtpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: SMTP server: %w", err)
	}
	s := &smtpSink{ln: ln, done: make(chan struct{}), tr: tr}
	s.srv = gosmtp.NewServer(s)
	s.srv.Domain = "sink.bench.invalid"
	s.srv.ErrorLog = log.New(io.Discard, "", 0)
	s.srv.ReadTimeout = time.Minute
	s.srv.WriteTimeout = time.Minute
	s.srv.MaxMessageBytes = transport.MaxEncodedSize
	var served net.Listener = ln
	if delay > 0 {
		served = &netdelay.Listener{Listener: ln, D: delay}
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(served)
	}()
	return s, nil
}

func (s *smtpSink) url() string { return "smtp://" + s.ln.Addr().String() + "?tls=none" }

// connections returns how many SMTP connections the server accepted.
func (s *smtpSink) connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

func (s *smtpSink) close() {
	_ = s.srv.Close()
	_ = s.ln.Close()
	<-s.done
}

// NewSession implements gosmtp.Backend.
func (s *smtpSink) NewSession(*gosmtp.Conn) (gosmtp.Session, error) {
	s.mu.Lock()
	s.conns++
	s.mu.Unlock()
	return &sinkSession{s: s}, nil
}

type sinkSession struct{ s *smtpSink }

func (*sinkSession) Reset()                                 {}
func (*sinkSession) Logout() error                          { return nil }
func (*sinkSession) Mail(string, *gosmtp.MailOptions) error { return nil }
func (*sinkSession) Rcpt(string, *gosmtp.RcptOptions) error { return nil }

func (ss *sinkSession) Data(r io.Reader) error {
	m, err := mail.ReadMessage(r)
	if err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, m.Body); err != nil {
		return err
	}
	id := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(m.Header.Get("Message-Id")), "<"), ">")
	ss.s.tr.deliver(id)
	return nil
}

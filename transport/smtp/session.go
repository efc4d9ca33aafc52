package smtp

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	mailsmtp "github.com/wneessen/go-mail/smtp"
)

// quitWait bounds the polite QUIT when an idle or closed transport lets a
// connection go.
const quitWait = time.Second

// session is one SMTP connection, greeted, secured and authenticated,
// ready for MAIL FROM. It is used by one Send at a time.
type session struct {
	conn *conn
	sc   *mailsmtp.Client
	idle *time.Timer // set while the session waits in the pool
}

// dial opens a session: TCP connect, implicit TLS handshake or greeting,
// EHLO, STARTTLS, AUTH. All of it is bounded by ctx and by the per-I/O
// timeout. On failure nothing stays open and the error is classified;
// nothing of a mail was sent.
func (t *Transport) dial(ctx context.Context) (*session, error) {
	d := net.Dialer{Timeout: t.cfg.timeout}
	raw, err := d.DialContext(ctx, "tcp", t.cfg.addr)
	if err != nil {
		return nil, t.setupError(ctx, "connect", err)
	}
	c := &conn{Conn: raw, timeout: t.cfg.timeout}
	stop := c.bind(ctx)
	s, stage, err := t.handshake(ctx, c)
	if !stop() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		_ = c.Close()
		return nil, t.setupError(ctx, stage, err)
	}
	return s, nil
}

// handshake runs the protocol up to the first MAIL FROM on c. stage names
// the step that failed.
func (t *Transport) handshake(ctx context.Context, c *conn) (s *session, stage string, err error) {
	var nc net.Conn = c
	if t.cfg.tlsMode == ImplicitTLS {
		tc := tls.Client(c, t.cfg.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, "tls handshake", err
		}
		nc = tc
	}
	sc, err := mailsmtp.NewClient(nc, t.cfg.host)
	if err != nil {
		return nil, "greeting", err
	}
	if err := sc.Hello(t.cfg.helo); err != nil {
		return nil, "ehlo", err
	}
	if t.cfg.tlsMode == StartTLS {
		if ok, _ := sc.Extension("STARTTLS"); !ok {
			return nil, "starttls", errNoSTARTTLS
		}
		if err := sc.StartTLS(t.cfg.tls); err != nil {
			return nil, "starttls", err
		}
	}
	if t.cfg.username != "" {
		a := &auth{username: t.cfg.username, password: t.cfg.password, allowPlaintext: t.cfg.tlsMode == NoTLS}
		if err := sc.Auth(a); err != nil {
			return nil, "auth", err
		}
	}
	return &session{conn: c, sc: sc}, "", nil
}

// idleState is what a look at an idle connection's socket found.
type idleState int

const (
	unknown idleState = iota // cannot tell without asking the server
	open                     // nothing waiting to be read, not closed
	gone                     // closed by the server, or broken
)

// usable reports whether a session that waited in the pool can carry the
// next mail. Most of the time a look at its socket answers without a round
// trip: nothing to read means the server has neither hung up nor said
// anything since the last reply. Only when bytes are waiting (a 421 before
// the server hung up, or anything the look cannot tell from it) does it
// ask the server, with NOOP, within ctx. A server that vanished without
// closing the connection passes the look; the MAIL FROM that follows finds
// out, and Send then moves to another connection (see Transport.send).
func (s *session) usable(ctx context.Context) bool {
	state := unknown // a reply already read and waiting: ask
	if s.sc.Text.R.Buffered() == 0 {
		state = s.conn.look()
	}
	switch state {
	case open:
		return true
	case gone:
		return false
	}
	stop := s.conn.bind(ctx)
	err := s.sc.Noop()
	return stop() && err == nil
}

// quit says QUIT, waiting at most quitWait, and closes the connection.
func (s *session) quit() {
	s.conn.setLimit(time.Now().Add(quitWait))
	_ = s.sc.Quit()
	s.close()
}

// close drops the connection without a word.
func (s *session) close() { _ = s.conn.Close() }

package fake

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mailspool/mailspool/classify"
	"github.com/mailspool/mailspool/transport"
)

// Send takes the next step (see [Options]) and returns what a real adapter
// returns for that recorded response, classified by package classify: nil
// and a Receipt whose MessageID is m.MessageID (or a generated one) for an
// accepting step, otherwise a classified error.
//
// Before any step, Send fails without an attempt after Close (Connection,
// [ErrClosed] in the chain), with a context already done or done during
// the latency (as a dial timeout), and for an invalid m (Permanent, the
// [transport.ValidationError] in the chain). Send never modifies m.
func (t *Transport) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	if err := t.ready(ctx, m); err != nil {
		return transport.Receipt{}, err
	}
	msg := *m
	if msg.MessageID == "" {
		msg.MessageID = transport.NewMessageID(msg.From.Address)
	}
	f, err := t.take(&msg)
	if err != nil {
		return transport.Receipt{}, err
	}
	switch f.kind {
	case kindSMTPReply:
		err = classify.SMTPReply(f.reply)
	case kindHTTP:
		err = classify.HTTP(f.status, f.header, f.body)
	case kindRefused:
		err = classify.Error(opError("dial", &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}))
	case kindTLS:
		err = classify.Error(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}})
	case kindHang:
		err = classify.Error(t.block(ctx))
	case kindStall:
		err = classify.MaybeDelivered(t.block(ctx))
	}
	if err != nil {
		return transport.Receipt{}, err
	}
	t.recordSent(&msg)
	return transport.Receipt{MessageID: msg.MessageID, Response: f.response()}, nil
}

// ready fails Send before an attempt: after Close, for a context done
// before or during the latency, or for an invalid message.
func (t *Transport) ready(ctx context.Context, m *transport.Message) error {
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return closedError()
	}
	if err := m.Validate(); err != nil {
		return &transport.Error{Kind: transport.Permanent, Rule: "invalid-message", Err: err}
	}
	if ctx.Err() != nil {
		return classify.Error(opError("dial", ctxNetError(ctx)))
	}
	if t.latency > 0 {
		timer := time.NewTimer(t.latency)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			return classify.Error(opError("dial", ctxNetError(ctx)))
		case <-t.closing:
			return closedError()
		}
	}
	return nil
}

// block waits as a client does for a server that never answers, until the
// context is done, the timeout passes or the transport is closed, and
// returns the read error the client then sees.
func (t *Transport) block(ctx context.Context) error {
	timer := time.NewTimer(t.timeout)
	defer timer.Stop()
	select {
	case <-timer.C:
		return opError("read", os.ErrDeadlineExceeded)
	case <-ctx.Done():
		return opError("read", os.ErrDeadlineExceeded)
	case <-t.closing:
		return opError("read", net.ErrClosed)
	}
}

// ctxNetError is the error a dial returns for a done context.
func ctxNetError(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return os.ErrDeadlineExceeded
	}
	return ctx.Err()
}

// serverAddr is the address the fake's network errors name (RFC 5737).
var serverAddr = &net.TCPAddr{IP: net.IPv4(192, 0, 2, 25), Port: 587}

func opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Addr: serverAddr, Err: err}
}

func closedError() error {
	return &transport.Error{Kind: transport.Connection, Rule: "transport-closed", Err: ErrClosed}
}

// response is the acceptance text of an accepting fixture: the reply after
// its code ("2.0.0 OK ...") or the HTTP status line ("202 Accepted").
func (f *fixture) response() string {
	if f.kind == kindHTTP {
		return strconv.Itoa(f.status) + " " + http.StatusText(f.status)
	}
	last := f.reply[strings.LastIndex(f.reply, "\n")+1:]
	if len(last) > 4 {
		return last[4:]
	}
	return ""
}

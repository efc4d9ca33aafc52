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

// outcome is what a real adapter returns for the response f records,
// classified by package classify: nil for an accepting response. A hang or
// stall step blocks first (see block).
func (t *Transport) outcome(ctx context.Context, f *fixture) error {
	switch f.kind {
	case kindSMTPReply:
		return classify.SMTPReply(f.reply)
	case kindHTTP:
		return classify.HTTP(f.status, f.header, f.body)
	case kindRefused:
		return classify.Error(opError("dial", &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}))
	case kindTLS:
		return classify.Error(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}})
	case kindHang:
		return classify.Error(t.block(ctx))
	case kindStall:
		return classify.MaybeDelivered(t.block(ctx))
	case kindPanic:
		panic("fake: the panic step (a scripted crash for tests)")
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
	return &transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane, Rule: "transport-closed", Err: transport.ErrClosed}
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

package smtp

import (
	"context"
	"errors"
	"fmt"

	"github.com/wneessen/go-mail"

	"github.com/mailspool/mailspool/classify"
	"github.com/mailspool/mailspool/transport"
)

// errNoSTARTTLS: TLS is mandatory and the server does not offer STARTTLS
// (or someone on the path removed it).
var errNoSTARTTLS = errors.New("smtp: server does not offer STARTTLS, and tls=starttls requires it")

// setupError classifies a failure before any mail was handed over: it is
// never MaybeDelivered. When ctx ended, its error is the cause.
func (t *Transport) setupError(ctx context.Context, stage string, err error) error {
	switch {
	case errors.Is(err, errNoSTARTTLS):
		return &transport.Error{Kind: transport.Connection, Rule: "smtp-starttls-missing", Detail: "server does not offer STARTTLS", Err: err}
	case errors.Is(err, errAuthNeedsTLS):
		return &transport.Error{Kind: transport.Connection, Rule: "smtp-auth-without-tls", Detail: "credentials refused over a connection without TLS", Err: err}
	case errors.Is(err, errNoAuthMechanism):
		return &transport.Error{Kind: transport.Connection, Rule: "smtp-auth-mechanism", Detail: "server offers no supported AUTH mechanism", Err: err}
	}
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		err = fmt.Errorf("%w: %w", ctxErr, err)
	}
	return classify.Error(fmt.Errorf("smtp: %s %s: %w", stage, t.cfg.addr, err))
}

// sendError classifies a failed transaction: a connection lost or silent
// after the DATA terminator without a reply may have delivered the mail;
// everything else is a reply or a failure before the mail was handed over.
func sendError(err error) error {
	var se *mail.SendError
	if errors.As(err, &se) && se.Reason == mail.ErrSMTPDataClose && se.ErrorCode() == 0 {
		return classify.MaybeDelivered(err)
	}
	return classify.Error(err)
}

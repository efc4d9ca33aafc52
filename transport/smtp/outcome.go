package smtp

import (
	"context"
	"errors"
	"fmt"

	"net/textproto"

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
		return &transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane, Rule: "smtp-starttls-missing", Detail: "server does not offer STARTTLS", Err: err}
	case errors.Is(err, errAuthNeedsTLS):
		return &transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane, Rule: "smtp-auth-without-tls", Detail: "credentials refused over a connection without TLS", Err: err}
	case errors.Is(err, errNoAuthMechanism):
		return &transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane, Rule: "smtp-auth-mechanism", Detail: "server offers no supported AUTH mechanism", Err: err}
	}
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		err = fmt.Errorf("%w: %w", ctxErr, err)
	}
	return t.replySession(stageCommands[stage]).Error(fmt.Errorf("smtp: %s %s: %w", stage, t.cfg.addr, err))
}

// stageCommands names the SMTP command of a handshake stage whose reply
// classify reads by it.
var stageCommands = map[string]string{"ehlo": "EHLO", "auth": "AUTH"}

// stepCommands names the SMTP command of a transaction step.
var stepCommands = map[string]string{stepMail: "MAIL", stepRcpt: "RCPT", stepData: "DATA", stepContent: "DATA", stepEnd: "DATA"}

// replySession is what classify is told of a reply to command: whether this
// lane submits through a relay (it logs in, or talks to a submission port)
// rather than to the recipient's own mail server, and the command.
func (t *Transport) replySession(command string) classify.Session {
	return classify.Session{Relay: t.cfg.relay(), Command: command}
}

// The steps of a mail transaction, as a *stepError names them.
const (
	stepMessage = "envelope of"  // the addresses could not be taken from the message
	stepMail    = "MAIL FROM"    // the command or its reply
	stepRcpt    = "RCPT TO"      // the command or its reply
	stepData    = "DATA"         // the command or its 354
	stepContent = "message data" // writing the message
	stepEnd     = "end of data"  // the terminator and the reply to the whole mail
)

// stepError is a failed step of a mail transaction.
type stepError struct {
	step string
	err  error
	// broken: the session is in no state to go on, whatever the reply
	// said (an answer to a pipelined command is missing, or the server
	// waits for message data).
	broken bool
}

func (e *stepError) Error() string { return "smtp: " + e.step + ": " + e.err.Error() }

func (e *stepError) Unwrap() error { return e.err }

// staleAtMail reports whether err is a MAIL FROM that failed the way a
// connection the server let go while idle fails: without a reply (closed,
// reset, silent) or with 421, the reply a server gives as it closes the
// channel. Nothing of a mail has been taken at that point.
func staleAtMail(err error) bool {
	var se *stepError
	if !errors.As(err, &se) || se.step != stepMail {
		return false
	}
	var reply *textproto.Error
	if errors.As(err, &reply) {
		return reply.Code == 421
	}
	return true
}

// sendError classifies a failed transaction: a connection lost or silent
// after the DATA terminator without a reply may have delivered the mail;
// everything else is a reply or a failure before the mail was handed over.
func (t *Transport) sendError(err error) error {
	var se *stepError
	if !errors.As(err, &se) {
		return t.replySession("").Error(err)
	}
	s := t.replySession(stepCommands[se.step])
	if se.step == stepEnd {
		return s.MaybeDelivered(err)
	}
	return s.Error(err)
}

package classify

import (
	"context"
	"errors"
	"net/textproto"

	"github.com/mailspool/mailspool/transport"
)

// Error classifies any Go error from a dial, a TLS handshake, an SMTP
// library or an HTTP client, keeping err as the cause (Err) of the
// *transport.Error it returns:
//
//   - nil is nil; an err with a *transport.Error in its chain is returned as
//     it is (it is classified already);
//   - a *net/textproto.Error in the chain is an SMTP reply, classified as by
//     [SMTP] (a 2xx or 3xx there was unexpected: Temporary);
//   - context.Canceled is Temporary; context.DeadlineExceeded and every
//     timeout are Connection with Detail "timeout";
//   - DNS, refused, reset, EOF, TLS and certificate failures are Connection
//     with a short Detail such as "connection refused", "dns lookup failed" or
//     "tls: certificate not trusted";
//   - a 4xx or 5xx SMTP reply found in the text of an error that hides it
//     (go-mail's SendError, "SMTP AUTH failed: 535 5.7.8 ...", Go's quoted
//     `550 "5.1.1 ..."`) is classified as by [SMTP]; numbers inside IP
//     addresses, ports, timestamps or ids are not taken for reply codes;
//   - the text of a flattened network error ("connection refused", "i/o
//     timeout", "x509: ...") is recognised as above;
//   - anything else is Temporary with no Detail.
//
// Error is for failures before the mail was fully handed over; after the
// SMTP DATA terminator or a fully sent HTTP request body use [MaybeDelivered].
func Error(err error) error {
	return Session{}.Error(err)
}

// Error is [Error] for a failure of this session: a reply found in err is
// read as this session's (see [Session.SMTP]).
func (s Session) Error(err error) error {
	if err == nil {
		return nil
	}
	if errors.As(err, new(*transport.Error)) {
		return err
	}
	return s.classifyError(err)
}

// MaybeDelivered classifies a failure that came after the whole mail was
// handed over (the SMTP DATA terminator or the whole HTTP request body was
// sent) without a reply: an EOF, a reset, a timeout. The result is
// Temporary with MaybeDelivered set, the Detail [Error] would give (such as
// "timeout") and the cause. When err carries a real reply instead (a
// *transport.Error with a Code, a *net/textproto.Error, a reply in its
// text), the reply is an answer, not a maybe: the result is [Error]'s.
// MaybeDelivered(nil) is nil.
func MaybeDelivered(err error) error {
	return Session{}.MaybeDelivered(err)
}

// MaybeDelivered is [MaybeDelivered] for a failure of this session.
func (s Session) MaybeDelivered(err error) error {
	if err == nil {
		return nil
	}
	var prior *transport.Error
	if errors.As(err, &prior) {
		if prior.Code != 0 {
			return err
		}
		maybe := *prior
		maybe.Kind, maybe.Scope, maybe.MaybeDelivered, maybe.Rule = transport.Temporary, transport.ScopeTransient, true, ruleMaybeDelivered
		return &maybe
	}
	c := s.classifyError(err)
	if c.Code == 0 {
		c.Kind, c.Scope, c.MaybeDelivered, c.Rule = transport.Temporary, transport.ScopeTransient, true, ruleMaybeDelivered
	}
	return c
}

// ruleMaybeDelivered names the rule of [MaybeDelivered].
const ruleMaybeDelivered = "maybe-delivered"

// classifyError is [Error] for a non-nil err without a *transport.Error.
func (s Session) classifyError(err error) *transport.Error {
	var tpe *textproto.Error
	if errors.As(err, &tpe) {
		return s.reply(tpe.Code, tpe.Msg, err)
	}
	switch {
	case errors.Is(err, context.Canceled):
		return &transport.Error{Kind: transport.Temporary, Rule: "go-canceled", Detail: "canceled", Err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane, Rule: "go-deadline", Detail: "timeout", Err: err}
	}
	if detail, ok := network(err); ok {
		return &transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane, Rule: networkRule(detail), Detail: detail, Err: err}
	}
	text := err.Error()
	if code, msg, ok := embeddedReply(text); ok {
		return s.reply(code, msg, err)
	}
	if detail, ok := networkText(text); ok {
		return &transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane, Rule: networkRule(detail), Detail: detail, Err: err}
	}
	return &transport.Error{Kind: transport.Temporary, Rule: "go-unknown", Err: err}
}

// reply classifies an SMTP reply carried by the error cause. A success
// code there is a protocol surprise (the client expected another reply),
// not a success: Temporary.
func (s Session) reply(code int, text string, cause error) *transport.Error {
	c, ok := s.SMTP(code, "", text).(*transport.Error)
	if !ok {
		c = &transport.Error{Kind: transport.Temporary, Code: code, Rule: "smtp-unexpected-success", Detail: cleanDetail("unexpected smtp reply: " + text)}
	}
	c.Err = cause
	return c
}

package smtp

import (
	"errors"
	"io"
	"net/textproto"
	"strings"

	mailsmtp "github.com/wneessen/go-mail/smtp"

	"github.com/mailspool/mailspool/transport/internal/render"
)

// transaction runs one mail transaction on sc: MAIL FROM, RCPT TO, DATA,
// the message and its terminator. It returns the text of the server's 250
// reply to the terminator. After that reply the transaction is over and
// the session is ready for the next MAIL FROM (RFC 5321, section 3.3), so
// no RSET follows. A failure is a *stepError naming the step; whether the
// session can be used again after it is for reusable to say.
//
// When the server offers PIPELINING the envelope goes out as one group
// (see pipelined): a mail then costs two round trips, the envelope and the
// message, instead of four.
func transaction(sc *mailsmtp.Client, msg *render.Mail) (string, error) {
	from, err := msg.Msg.GetSender(false)
	if err != nil {
		return "", &stepError{step: stepMessage, err: err}
	}
	rcpts, err := msg.Msg.GetRecipients()
	if err != nil {
		return "", &stepError{step: stepMessage, err: err}
	}
	for _, a := range append([]string{from}, rcpts...) {
		if strings.ContainsAny(a, "\r\n") { // Validate refuses these already
			return "", &stepError{step: stepMessage, err: errors.New("smtp: address contains CR or LF")}
		}
	}
	if ok, _ := sc.Extension("PIPELINING"); ok {
		err = pipelined(sc, from, rcpts)
	} else {
		err = stepByStep(sc, from, rcpts)
	}
	if err != nil {
		return "", err
	}
	return content(sc, msg)
}

// stepByStep sends the envelope one command at a time, each waiting for
// its reply, up to the 354 that asks for the message.
func stepByStep(sc *mailsmtp.Client, from string, rcpts []string) error {
	if err := sc.Mail(from); err != nil {
		return &stepError{step: stepMail, err: err}
	}
	for _, rcpt := range rcpts {
		if err := sc.Rcpt(rcpt); err != nil {
			return &stepError{step: stepRcpt, err: err}
		}
	}
	// Not sc.Data: the writer it returns is a DotWriter of sc.Text, and
	// content's DotWriter would end it, writing a terminator.
	if err := sc.Text.PrintfLine("DATA"); err != nil {
		return &stepError{step: stepData, err: err}
	}
	if _, _, err := sc.Text.ReadResponse(354); err != nil {
		return &stepError{step: stepData, err: err}
	}
	return nil
}

// pipelined sends MAIL FROM, every RCPT TO and DATA as one group in one
// write, then reads their replies in order (RFC 2920), up to the 354 that
// asks for the message. Every reply of the group is read whatever the ones
// before it said, and the first refusal is the outcome. A DATA accepted
// after a refusal (a server may take DATA with no valid recipient) is
// never answered with a message, not even an empty one: the session is
// marked broken, so that it is closed, and closing it mid-DATA makes the
// server drop the transaction.
func pipelined(sc *mailsmtp.Client, from string, rcpts []string) error {
	w := sc.Text.W
	_, _ = w.WriteString(mailCommand(sc, from) + "\r\n")
	for _, rcpt := range rcpts {
		_, _ = w.WriteString("RCPT TO:" + rcpt + "\r\n")
	}
	_, _ = w.WriteString("DATA\r\n")
	if err := w.Flush(); err != nil {
		return &stepError{step: stepMail, err: err, broken: true}
	}
	type expect struct {
		step string
		code int // as textproto.Reader.ReadResponse takes it
	}
	group := []expect{{stepMail, 250}}
	for range rcpts {
		group = append(group, expect{stepRcpt, 25})
	}
	group = append(group, expect{stepData, 354})
	var refused *stepError
	dataAccepted := false
	for _, e := range group {
		_, _, err := sc.Text.ReadResponse(e.code)
		var reply *textproto.Error
		switch {
		case err == nil:
			dataAccepted = e.step == stepData
		case !errors.As(err, &reply) || reply.Code == 421:
			// No reply, or the server closing the connection: the rest
			// of the group will not be answered.
			if refused == nil {
				refused = &stepError{step: e.step, err: err}
			}
			refused.broken = true
			return refused
		case refused == nil:
			refused = &stepError{step: e.step, err: err}
		}
	}
	if refused != nil {
		refused.broken = dataAccepted // the server waits for a message: see above
		return refused
	}
	return nil
}

// mailCommand is the MAIL FROM command go-mail's Client.Mail sends for
// from: BODY=8BITMIME and SMTPUTF8 when the server offers them.
func mailCommand(sc *mailsmtp.Client, from string) string {
	cmd := "MAIL FROM:" + from
	if ok, _ := sc.Extension("8BITMIME"); ok {
		cmd += " BODY=8BITMIME"
	}
	if ok, _ := sc.Extension("SMTPUTF8"); ok {
		cmd += " SMTPUTF8"
	}
	return cmd
}

// content writes the message after the server's 354, then the terminator,
// and returns the text of the server's 250 reply to it.
func content(sc *mailsmtp.Client, msg io.WriterTo) (string, error) {
	w := &dataWriter{w: sc.Text.W}
	if _, err := msg.WriteTo(w); err != nil {
		return "", &stepError{step: stepContent, err: err, broken: true}
	}
	// From the terminator on, a failure without a reply may have
	// delivered the mail.
	if err := w.Close(); err != nil {
		return "", &stepError{step: stepEnd, err: err, broken: true}
	}
	_, response, err := sc.Text.ReadResponse(250)
	if err != nil {
		return "", &stepError{step: stepEnd, err: err}
	}
	return response, nil
}

// reusable reports whether sc can carry another mail after its transaction
// failed with err. It can when the server answered with a refusal (4xx or
// 5xx, but not 421, which says the server is closing the connection) and
// the transaction is over: the reply to the end of data ends it, and
// before that RSET abandons it. A bounced recipient then costs one round
// trip instead of a new connection (and its TLS handshake and AUTH). Any
// other failure leaves the session in a state no one can tell, and it is
// dropped; a message whose envelope could not be written sent nothing, and
// the session is kept as it was.
func reusable(sc *mailsmtp.Client, err error) bool {
	var se *stepError
	if !errors.As(err, &se) || se.broken {
		return false
	}
	if se.step == stepMessage {
		return true // nothing was sent
	}
	var reply *textproto.Error
	if !errors.As(err, &reply) || reply.Code < 400 || reply.Code == 421 {
		return false
	}
	return se.step == stepEnd || sc.Reset() == nil
}

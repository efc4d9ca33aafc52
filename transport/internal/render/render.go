// Package render turns a [transport.Message] into a go-mail message and into
// the raw RFC 5322 bytes of that message, for the adapters that hand MIME to
// their provider (SMTP through go-mail, SES as a raw message).
package render

import (
	"strings"

	"github.com/wneessen/go-mail"

	"github.com/mailspool/mailspool/transport"
)

// Msg validates m ([transport.Message.Validate]) and returns the go-mail
// message for it, without m's attachments (see [Render]):
//
//   - From, To and Reply-To with their display names (RFC 2047 encoded when
//     not ASCII); the envelope sender and recipient are From and To;
//   - Subject (RFC 2047 encoded when needed), Date (now) and Message-ID,
//     m.MessageID or, when it is empty, a fresh [transport.NewMessageID];
//   - a text/plain or text/html body, or multipart/alternative with both,
//     UTF-8 and quoted-printable;
//   - the extra headers, values RFC 2047 encoded when needed. go-mail writes
//     header fields sorted by name, so the order of m.Headers is not kept
//     (Validate refuses a name given twice, in any case);
//   - no User-Agent or X-Mailer.
//
// The Message-ID the mail goes out with is [mail.Msg.GetMessageID] with its
// angle brackets. Errors from Validate match [transport.ErrInvalidMessage].
func Msg(m *transport.Message) (*mail.Msg, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	msg := mail.NewMsg(mail.WithNoDefaultUserAgent())
	msg.FromMailAddress(&m.From)
	msg.ToMailAddress(&m.To)
	if m.ReturnPath != "" {
		// The envelope sender: MAIL FROM, never a header of the mail.
		if err := msg.EnvelopeFrom(m.ReturnPath); err != nil {
			return nil, &transport.ValidationError{Field: "return_path", Reason: err.Error()}
		}
	}
	if m.ReplyTo.Address != "" {
		msg.ReplyToMailAddress(&m.ReplyTo)
	}
	msg.Subject(m.Subject)
	msg.SetDate()
	id := m.MessageID
	if id == "" {
		id = transport.NewMessageID(m.From.Address)
	}
	msg.SetMessageIDWithValue(id)
	switch {
	case m.Text != "" && m.HTML != "":
		msg.SetBodyString(mail.TypeTextPlain, m.Text)
		msg.AddAlternativeString(mail.TypeTextHTML, m.HTML)
	case m.Text != "":
		msg.SetBodyString(mail.TypeTextPlain, m.Text)
	default:
		msg.SetBodyString(mail.TypeTextHTML, m.HTML)
	}
	// Validate has refused a header name given twice: go-mail keeps one
	// value per name.
	for _, h := range m.Headers {
		msg.SetGenHeader(mail.Header(h.Name), h.Value)
	}
	return msg, nil
}

// MIME returns the raw RFC 5322 bytes (CRLF line endings) of the message
// [Render] builds for m, attachments included, with the same validation
// and errors.
func MIME(m *transport.Message) ([]byte, error) {
	r, err := Render(m)
	if err != nil {
		return nil, err
	}
	return r.MIME()
}

// MessageID returns the Message-ID value msg goes out with, without the
// angle brackets ("" when it has none).
func MessageID(msg *mail.Msg) string {
	return strings.TrimSuffix(strings.TrimPrefix(msg.GetMessageID(), "<"), ">")
}

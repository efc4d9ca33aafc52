package ses

// TEMPORARY stand-in for transport/internal/render.MIME until that package
// lands; deleted then.

import (
	"bytes"

	"github.com/wneessen/go-mail"

	"github.com/mailspool/mailspool/transport"
)

func renderMIME(m *transport.Message) ([]byte, error) {
	msg := mail.NewMsg(mail.WithNoDefaultUserAgent())
	if err := msg.FromFormat(m.From.Name, m.From.Address); err != nil {
		return nil, err
	}
	if err := msg.AddToFormat(m.To.Name, m.To.Address); err != nil {
		return nil, err
	}
	if m.ReplyTo.Address != "" {
		if err := msg.ReplyToFormat(m.ReplyTo.Name, m.ReplyTo.Address); err != nil {
			return nil, err
		}
	}
	msg.Subject(m.Subject)
	msg.SetMessageIDWithValue(m.MessageID)
	msg.SetDate()
	for _, h := range m.Headers {
		msg.SetGenHeader(mail.Header(h.Name), h.Value)
	}
	switch {
	case m.Text != "" && m.HTML != "":
		msg.SetBodyString(mail.TypeTextPlain, m.Text)
		msg.AddAlternativeString(mail.TypeTextHTML, m.HTML)
	case m.Text != "":
		msg.SetBodyString(mail.TypeTextPlain, m.Text)
	default:
		msg.SetBodyString(mail.TypeTextHTML, m.HTML)
	}
	var b bytes.Buffer
	if _, err := msg.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

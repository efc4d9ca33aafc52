package conformance

import (
	"net/textproto"

	"github.com/mailspool/mailspool/transport"
)

// ReceivedFromMessage returns the Received that a backend which records
// structured messages rather than MIME (an in-memory fake, an API that takes
// JSON fields) shows for m: the fields copied, Header holding From, To,
// Subject, Message-Id (in angle brackets, when m has an id), Reply-To (when
// set) and every extra header.
func ReceivedFromMessage(m *transport.Message) Received {
	h := make(textproto.MIMEHeader)
	h.Set("From", m.From.String())
	h.Set("To", m.To.String())
	h.Set("Subject", m.Subject)
	if m.MessageID != "" {
		h.Set("Message-Id", "<"+m.MessageID+">")
	}
	if m.ReplyTo.Address != "" {
		h.Set("Reply-To", m.ReplyTo.String())
	}
	for _, x := range m.Headers {
		h.Add(x.Name, x.Value)
	}
	return Received{
		From:     m.From.Address,
		FromName: m.From.Name,
		To:       []string{m.To.Address},
		ToName:   m.To.Name,
		Subject:  m.Subject,
		Text:     m.Text,
		HTML:     m.HTML,
		Header:   h,

		Attachments: m.Attachments,
	}
}

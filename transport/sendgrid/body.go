package sendgrid

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	sgmail "github.com/sendgrid/sendgrid-go/helpers/mail"

	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/internal/render"
)

// requestBody validates m and returns the v3 mail/send JSON for it: one
// personalization with the one recipient, text/plain before text/html (the
// order SendGrid requires), reply_to, and the extra headers plus Message-ID
// (a fresh one when m has none), and the attachments array: each file in
// base64 with its type, file name (UTF-8: SendGrid encodes it), and
// disposition, inline ones with their content_id.
//
// Addresses go out in 7-bit ASCII, internationalized domains as A-labels:
// SendGrid, like SES, does not take SMTPUTF8 addresses, and an address with
// a local part that is not ASCII is refused as invalid.
func requestBody(m *transport.Message) ([]byte, error) {
	m, err := render.ASCII(m)
	if err != nil {
		return nil, err
	}
	v3 := sgmail.NewV3Mail()
	v3.SetFrom(sgmail.NewEmail(m.From.Name, m.From.Address))
	v3.Subject = m.Subject
	p := sgmail.NewPersonalization()
	p.AddTos(sgmail.NewEmail(m.To.Name, m.To.Address))
	v3.AddPersonalizations(p)
	if m.Text != "" {
		v3.AddContent(sgmail.NewContent("text/plain", m.Text))
	}
	if m.HTML != "" {
		v3.AddContent(sgmail.NewContent("text/html", m.HTML))
	}
	if m.ReplyTo.Address != "" {
		v3.SetReplyTo(sgmail.NewEmail(m.ReplyTo.Name, m.ReplyTo.Address))
	}
	id := m.MessageID
	if id == "" {
		id = transport.NewMessageID(m.From.Address)
	}
	v3.SetHeader("Message-ID", "<"+id+">")
	// Validate has refused a header name given twice, which the JSON
	// object of headers could not hold.
	for _, h := range m.Headers {
		v3.SetHeader(h.Name, h.Value)
	}
	for i := range m.Attachments {
		a := &m.Attachments[i]
		sa := &sgmail.Attachment{Content: base64.StdEncoding.EncodeToString(a.Data), Type: a.ContentTypeOrDefault(),
			Filename: a.Filename, Disposition: "attachment"}
		if a.Inline {
			sa.Disposition, sa.ContentID = "inline", a.ContentID
		}
		v3.AddAttachment(sa)
	}
	// Not sgmail.GetRequestBody: it logs and drops marshalling errors.
	body, err := json.Marshal(v3)
	if err != nil {
		return nil, fmt.Errorf("sendgrid: encode request: %w", err)
	}
	return body, nil
}

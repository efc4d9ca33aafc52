package conformance

import (
	"fmt"
	"net/mail"
	"strings"

	"github.com/mailspool/mailspool/transport"
)

// intactMessage returns the message the intact-content case sends: UTF-8 in
// the subject and every display name (one with a comma that needs quoting),
// text and HTML bodies with a line that is just "." (SMTP dot-stuffing) and
// one starting with "From " (mbox escaping), a Reply-To and extra headers.
func intactMessage() *transport.Message {
	return &transport.Message{
		MessageID: transport.NewMessageID("shop@example.com"),
		From:      mail.Address{Name: "Müller, Jörg — Shop", Address: "shop@example.com"},
		To:        mail.Address{Name: "张三 Zhang", Address: "zhang@example.net"},
		ReplyTo:   mail.Address{Name: "Kundendienst ✓", Address: "support@example.com"},
		Subject:   "Grüße — 你好 ✓ über $100",
		Text: "Hallo Jörg,\n\nyour order of $100 ships today.\n.\n" +
			"From here on, this line starts with \"From \".\n\nGrüße — 你好 ✓\n",
		HTML: "<p>Hallo J&ouml;rg, your order of $100 ships today.</p>\n.\n" +
			"From <b>here</b> on.\n<p>Grüße — 你好 ✓</p>\n",
		Headers: []transport.Header{
			{Name: "List-Unsubscribe", Value: "<https://example.com/u/abc123>, <mailto:unsub@example.com>"},
			{Name: "List-Unsubscribe-Post", Value: "List-Unsubscribe=One-Click"},
			{Name: "X-Mailspool-Test", Value: "intact-content"},
		},
	}
}

// compareReceived lists every way got differs from the message m that was
// sent; nil means the mail arrived intact. Bodies compare equal up to
// trailing newlines, which SMTP cannot keep (DATA ends with CRLF.CRLF).
func compareReceived(m *transport.Message, got Received) []string {
	var diffs []string
	check := func(field, want, got string) {
		if want != got {
			diffs = append(diffs, fmt.Sprintf("%s: got %q, want %q", field, got, want))
		}
	}
	check("From", m.From.Address, got.From)
	check("FromName", m.From.Name, got.FromName)
	if len(got.To) != 1 {
		diffs = append(diffs, fmt.Sprintf("To: got %d recipients %q, want exactly [%q]", len(got.To), got.To, m.To.Address))
	} else {
		check("To", m.To.Address, got.To[0])
	}
	check("ToName", m.To.Name, got.ToName)
	check("Subject", m.Subject, got.Subject)
	check("Text", strings.TrimRight(m.Text, "\n"), strings.TrimRight(got.Text, "\n"))
	check("HTML", strings.TrimRight(m.HTML, "\n"), strings.TrimRight(got.HTML, "\n"))
	check("Message-Id header", "<"+m.MessageID+">", got.Header.Get("Message-Id"))
	if m.ReplyTo.Address != "" {
		raw := got.Header.Get("Reply-To")
		if a, err := mail.ParseAddress(raw); err != nil {
			diffs = append(diffs, fmt.Sprintf("Reply-To header: %q does not parse: %v", raw, err))
		} else {
			check("Reply-To address", m.ReplyTo.Address, a.Address)
			check("Reply-To name", m.ReplyTo.Name, a.Name)
		}
	}
	for _, h := range m.Headers {
		check(h.Name+" header", h.Value, got.Header.Get(h.Name))
	}
	return diffs
}

package conformance

import (
	"bytes"
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

// attachmentMessage returns the message the attachments case sends: text
// and HTML, an inline image the HTML references, and two attachments, one
// named in UTF-8 long enough to need RFC 2231 continuations, one with
// bytes that are not text and a name with a space and a quote.
func attachmentMessage() *transport.Message {
	m := testMessage("attachments")
	m.HTML = `<p>Ihre Rechnung</p><img src="cid:logo@example.com" alt="logo">`
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	pdf := []byte("%PDF-1.4\n" + strings.Repeat("Rechnung März 2026 — 你好 \r\n. \n", 300) + "%%EOF\n")
	bin := make([]byte, 5000)
	for i := range bin {
		bin[i] = byte(i * 7)
	}
	m.Attachments = []transport.Attachment{
		{Filename: "logo.png", ContentType: "image/png", Data: png, Inline: true, ContentID: "logo@example.com"},
		{Filename: "Rechnung März 2026 — Übersicht für Jörg Müller (Kundennummer 4711).pdf", ContentType: "application/pdf", Data: pdf},
		{Filename: `data "raw" 1.bin`, ContentType: "application/octet-stream", Data: bin},
	}
	return m
}

// compareAttachments lists every way the files got differ from want's.
func compareAttachments(want []transport.Attachment, got []transport.Attachment) []string {
	if len(got) != len(want) {
		return []string{fmt.Sprintf("received %d attachments, want %d", len(got), len(want))}
	}
	var diffs []string
	for i, w := range want {
		g := got[i]
		if g.Filename != w.Filename {
			diffs = append(diffs, fmt.Sprintf("attachment %d: filename %q, want %q", i, g.Filename, w.Filename))
		}
		if g.ContentType != w.ContentType {
			diffs = append(diffs, fmt.Sprintf("attachment %d: content type %q, want %q", i, g.ContentType, w.ContentType))
		}
		if !bytes.Equal(g.Data, w.Data) {
			diffs = append(diffs, fmt.Sprintf("attachment %d (%s): %d bytes differ from the %d sent", i, w.Filename, len(g.Data), len(w.Data)))
		}
		if g.Inline != w.Inline || g.ContentID != w.ContentID {
			diffs = append(diffs, fmt.Sprintf("attachment %d: inline %v cid %q, want inline %v cid %q", i, g.Inline, g.ContentID, w.Inline, w.ContentID))
		}
	}
	return diffs
}

package render

import (
	"bytes"
	"errors"
	"net/mail"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mailspool/mailspool/conformance"
	"github.com/mailspool/mailspool/transport"
)

func fullMessage() *transport.Message {
	return &transport.Message{
		MessageID: "order-42@shop.example.com",
		From:      mail.Address{Name: "Müller, Jörg — Shop", Address: "shop@example.com"},
		To:        mail.Address{Name: "张三 Zhang", Address: "zhang@example.net"},
		ReplyTo:   mail.Address{Name: "Kundendienst ✓", Address: "support@example.com"},
		Subject:   "Grüße — 你好 ✓ über $100",
		Text:      "Hallo Jörg,\n.\nFrom here on.\n",
		HTML:      "<p>Hallo J&ouml;rg</p>\n<p>Grüße ✓</p>\n",
		Headers: []transport.Header{
			{Name: "List-Unsubscribe", Value: "<https://example.com/u/abc123>, <mailto:unsub@example.com>"},
			{Name: "List-Unsubscribe-Post", Value: "List-Unsubscribe=One-Click"},
			{Name: "X-Campaign", Value: "spring — sale ✓"},
		},
	}
}

// parse renders m and parses the bytes back as a receiving server would.
func parse(t *testing.T, m *transport.Message) (conformance.Received, []byte) {
	t.Helper()
	raw, err := MIME(m)
	if err != nil {
		t.Fatalf("MIME: %v", err)
	}
	got, err := conformance.ParseMIME(raw)
	if err != nil {
		t.Fatalf("ParseMIME: %v\n%s", err, raw)
	}
	return got, raw
}

func equal[T comparable](t *testing.T, field string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s: got %v, want %v", field, got, want)
	}
}

func TestMIMEFullMessage(t *testing.T) {
	t.Parallel()
	m := fullMessage()
	got, raw := parse(t, m)
	if bytes.Contains(bytes.ReplaceAll(raw, []byte("\r\n"), nil), []byte("\n")) {
		t.Error("a line does not end in CRLF")
	}
	equal(t, "From", got.From, m.From.Address)
	equal(t, "FromName", got.FromName, m.From.Name)
	if !slices.Equal(got.To, []string{m.To.Address}) {
		t.Errorf("To: got %q, want [%q]", got.To, m.To.Address)
	}
	equal(t, "ToName", got.ToName, m.To.Name)
	equal(t, "Subject", got.Subject, m.Subject)
	equal(t, "Text", got.Text, m.Text)
	equal(t, "HTML", got.HTML, m.HTML)
	equal(t, "Message-Id", got.Header.Get("Message-Id"), "<order-42@shop.example.com>")
	for _, h := range m.Headers {
		equal(t, h.Name, got.Header.Get(h.Name), h.Value)
	}
	replyTo, err := mail.ParseAddress(got.Header.Get("Reply-To"))
	if err != nil {
		t.Fatalf("Reply-To: %v", err)
	}
	equal(t, "Reply-To", *replyTo, m.ReplyTo)
	if ct := got.Header.Get("Content-Type"); !strings.HasPrefix(ct, "multipart/alternative;") {
		t.Errorf("Content-Type: got %q, want multipart/alternative", ct)
	}
	date, err := mail.ParseDate(got.Header.Get("Date"))
	if err != nil {
		t.Fatalf("Date: %v", err)
	}
	if d := time.Since(date); d < -time.Hour || d > time.Hour {
		t.Errorf("Date %v is not now", date)
	}
	equal(t, "User-Agent", got.Header.Get("User-Agent"), "")
	equal(t, "X-Mailer", got.Header.Get("X-Mailer"), "")

	header, _, _ := strings.Cut(string(raw), "\r\n\r\n")
	for _, line := range strings.Split(header, "\r\n") {
		for _, r := range line {
			if r > 127 {
				t.Errorf("header line %q is not 7-bit: UTF-8 must be RFC 2047 encoded", line)
				break
			}
		}
	}
}

func TestMIMESinglePart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, text, html, contentType string
	}{
		{"text only", "only text ✓\n", "", "text/plain;"},
		{"html only", "", "<p>only html ✓</p>\n", "text/html;"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := fullMessage()
			m.Text, m.HTML = tc.text, tc.html
			got, _ := parse(t, m)
			if ct := got.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.contentType) {
				t.Errorf("Content-Type: got %q, want %s", ct, tc.contentType)
			}
			equal(t, "Text", got.Text, tc.text)
			equal(t, "HTML", got.HTML, tc.html)
		})
	}
}

func TestMsgGeneratesMessageIDWhenEmpty(t *testing.T) {
	t.Parallel()
	m := fullMessage()
	m.MessageID = ""
	msg, err := Msg(m)
	if err != nil {
		t.Fatal(err)
	}
	id := MessageID(msg)
	if !strings.HasSuffix(id, "@example.com") || strings.ContainsAny(id, "<>") {
		t.Errorf("generated id %q: want hex@example.com", id)
	}
	equal(t, "caller's MessageID", m.MessageID, "")

	var buf bytes.Buffer
	if _, err := msg.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := conformance.ParseMIME(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "Message-Id written", got.Header.Get("Message-Id"), "<"+id+">")

	again, err := Msg(m)
	if err != nil {
		t.Fatal(err)
	}
	if MessageID(again) == id {
		t.Error("two renders of a message without an id got the same id")
	}
}

func TestMsgKeepsMessageID(t *testing.T) {
	t.Parallel()
	msg, err := Msg(fullMessage())
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "MessageID", MessageID(msg), "order-42@shop.example.com")
}

func TestMsgEnvelope(t *testing.T) {
	t.Parallel()
	msg, err := Msg(fullMessage())
	if err != nil {
		t.Fatal(err)
	}
	from, err := msg.GetSender(false)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "sender", from, "<shop@example.com>")
	rcpts, err := msg.GetRecipients()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rcpts, []string{"<zhang@example.net>"}) {
		t.Errorf("recipients: got %q, want only the To address", rcpts)
	}
}

func TestMsgNoReplyTo(t *testing.T) {
	t.Parallel()
	m := fullMessage()
	m.ReplyTo = mail.Address{}
	got, _ := parse(t, m)
	if v := got.Header.Values("Reply-To"); len(v) != 0 {
		t.Errorf("Reply-To: got %q, want none", v)
	}
}

func TestMsgRejectsInvalidMessage(t *testing.T) {
	t.Parallel()
	for name, edit := range map[string]func(m *transport.Message){
		"crlf in subject":      func(m *transport.Message) { m.Subject = "hi\r\nBcc: victim@example.org" },
		"lf in to name":        func(m *transport.Message) { m.To.Name = "x\nBcc: victim@example.org" },
		"crlf in header value": func(m *transport.Message) { m.Headers[0].Value = "v\r\nBcc: victim@example.org" },
		"crlf in header name":  func(m *transport.Message) { m.Headers[0].Name = "X-A\r\nBcc" },
		"reserved header":      func(m *transport.Message) { m.Headers[0].Name = "bcc" },
		"two recipients":       func(m *transport.Message) { m.To.Address = "a@example.net, b@example.net" },
		"crlf in address":      func(m *transport.Message) { m.To.Address = "a@example.net\r\nRCPT TO:<b@example.net>" },
		"no body":              func(m *transport.Message) { m.Text, m.HTML = "", "" },
		"repeated header name": func(m *transport.Message) { m.Headers[1].Name = "list-unsubscribe" },
	} {
		t.Run(name, func(t *testing.T) {
			m := fullMessage()
			edit(m)
			if _, err := Msg(m); !errors.Is(err, transport.ErrInvalidMessage) {
				t.Errorf("Msg: got %v, want ErrInvalidMessage", err)
			}
			if _, err := MIME(m); !errors.Is(err, transport.ErrInvalidMessage) {
				t.Errorf("MIME: got %v, want ErrInvalidMessage", err)
			}
		})
	}
	if _, err := Msg(nil); !errors.Is(err, transport.ErrInvalidMessage) {
		t.Errorf("Msg(nil): got %v, want ErrInvalidMessage", err)
	}
}

// TestMIMEHeaderValuesCannotInject feeds what Validate lets through but a
// careless renderer could still break on: values that look like header
// lines, a tab, and values long enough to need folding.
func TestMIMEHeaderValuesCannotInject(t *testing.T) {
	t.Parallel()
	m := fullMessage()
	long := strings.Repeat("word ", 150) + "end"
	m.Subject = "Bcc: victim@example.org " + long[:699]
	m.To.Name = "Zhang <evil@example.org>, Bcc: victim@example.org"
	m.Headers = []transport.Header{
		{Name: "X-Looks-Like-A-Header", Value: "Bcc: victim@example.org"},
		{Name: "X-Tab", Value: "a\tb"},
		{Name: "X-Long", Value: long},
	}
	got, raw := parse(t, m)
	if v := got.Header.Values("Bcc"); len(v) != 0 {
		t.Errorf("Bcc: got %q, want none", v)
	}
	if !slices.Equal(got.To, []string{m.To.Address}) {
		t.Errorf("To: got %q, want only %q", got.To, m.To.Address)
	}
	equal(t, "ToName", got.ToName, m.To.Name)
	equal(t, "Subject", got.Subject, m.Subject)
	equal(t, "X-Looks-Like-A-Header", got.Header.Get("X-Looks-Like-A-Header"), "Bcc: victim@example.org")
	equal(t, "X-Tab", got.Header.Get("X-Tab"), "a\tb")
	equal(t, "X-Long", got.Header.Get("X-Long"), long)
	for _, line := range strings.Split(string(raw), "\r\n") {
		if len(line) > 998 {
			t.Errorf("line of %d bytes is over the RFC 5322 limit", len(line))
		}
	}
}

func TestMIMEDotLinesStayInBody(t *testing.T) {
	t.Parallel()
	m := fullMessage()
	m.HTML = ""
	m.Text = "one\n.\nMAIL FROM:<evil@example.org>\r\n.\r\ntwo\n"
	got, _ := parse(t, m)
	equal(t, "Text", got.Text, "one\n.\nMAIL FROM:<evil@example.org>\n.\ntwo\n")
}

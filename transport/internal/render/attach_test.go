package render

import (
	"bytes"
	"mime"
	"net/mail"
	"strings"
	"testing"

	"github.com/mailspool/mailspool/transport"
)

// TestParamRFC2231: a name that is not ASCII is written per RFC 2231,
// continued over lines when long, never as an RFC 2047 word, and Go's MIME
// parser reads it back.
func TestParamRFC2231(t *testing.T) {
	for _, name := range []string{
		"report.pdf",
		`data "raw".bin`,
		"Rechnung März.pdf",
		"Rechnung März 2026 — Übersicht für Jörg Müller (Kundennummer 4711) 你好你好你好你好.pdf",
	} {
		v := "attachment;" + Param("filename", name)
		if strings.Contains(v, "=?") {
			t.Errorf("%q: an RFC 2047 word in %q", name, v)
		}
		for _, line := range strings.Split(v, "\r\n") {
			if len(line) > 78 {
				t.Errorf("%q: line of %d characters: %q", name, len(line), line)
			}
		}
		_, params, err := mime.ParseMediaType(strings.ReplaceAll(v, "\r\n", ""))
		if err != nil || params["filename"] != name {
			t.Errorf("%q written as %q reads back as %q (%v)", name, v, params["filename"], err)
		}
	}
	if got := Param("filename", "März.pdf"); got != "\r\n filename*=UTF-8''M%C3%A4rz.pdf" {
		t.Errorf("Param = %q", got)
	}
}

// TestRenderStructure: inline parts go in multipart/related with the body,
// attachments beside it in multipart/mixed; the encoded size estimate is
// not below what is written.
func TestRenderStructure(t *testing.T) {
	m := &transport.Message{
		From: mail.Address{Address: "shop@example.com"}, To: mail.Address{Address: "a@example.net"},
		Subject: "s", Text: "text", HTML: `<img src="cid:logo">`,
		Attachments: []transport.Attachment{
			{Filename: "logo.png", ContentType: "image/png", Data: bytes.Repeat([]byte{0x89, 'P'}, 1000), Inline: true, ContentID: "logo"},
			{Filename: "a.pdf", ContentType: "application/pdf", Data: bytes.Repeat([]byte("%PDF"), 10000)},
		},
	}
	raw, err := MIME(m)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	order := []string{"Content-Type: multipart/mixed", "Content-Type: multipart/related", "multipart/alternative", "text/plain", "text/html",
		"Content-Disposition: inline;", "Content-Id: <logo>", "Content-Disposition: attachment;"}
	at := 0
	for _, want := range order {
		i := strings.Index(s[at:], want)
		if i < 0 {
			t.Fatalf("%q missing after byte %d in:\n%s", want, at, s[:min(len(s), 3000)])
		}
		at += i
	}
	if n := m.EncodedSize(); n < len(raw) {
		t.Errorf("EncodedSize = %d, below the %d bytes written", n, len(raw))
	}
	for _, line := range strings.Split(s, "\r\n") {
		if len(line) > 998 {
			t.Fatalf("a line of %d bytes", len(line))
		}
	}
}

package transport_test

import (
	"errors"
	"net/mail"
	"strings"
	"testing"

	"github.com/mailspool/mailspool/transport"
)

func withAttachments(html string, as ...transport.Attachment) *transport.Message {
	return &transport.Message{
		From:        mail.Address{Address: "shop@example.com"},
		To:          mail.Address{Address: "rcpt@example.net"},
		Subject:     "invoice",
		Text:        "see attached",
		HTML:        html,
		Attachments: as,
	}
}

func TestValidateAttachments(t *testing.T) {
	png := transport.Attachment{Filename: "logo.png", ContentType: "image/png", Data: []byte("png"), Inline: true, ContentID: "logo@x"}
	pdf := transport.Attachment{Filename: "Rechnung März.pdf", ContentType: "application/pdf", Data: []byte("%PDF")}
	cases := []struct {
		name  string
		m     *transport.Message
		field string // "" = valid
	}{
		{"attachment and referenced inline part", withAttachments(`<img src="cid:logo@x">`, png, pdf), ""},
		{"cid reference in any case, percent-escaped", withAttachments(`<img src='CID:logo%40x'>`, png), ""},
		{"no content type: filled in at enqueue", withAttachments("", transport.Attachment{Filename: "a.bin", Data: []byte{1}}), ""},
		{"cid without an inline part", withAttachments(`<img src="cid:logo@x"><img src="cid:missing">`, png), "html"},
		{"inline part not referenced", withAttachments(`<p>no image</p>`, png), "attachments[0].content_id"},
		{"inline part without html", withAttachments("", png), "attachments[0].content_id"},
		{"inline without content id", withAttachments("", transport.Attachment{Filename: "a.png", Data: []byte{1}, Inline: true}), "attachments[0].content_id"},
		{"content id on an attachment", withAttachments("", transport.Attachment{Filename: "a.png", Data: []byte{1}, ContentID: "a"}), "attachments[0].content_id"},
		{"content id with angle brackets", withAttachments(`cid:<a>`, transport.Attachment{Filename: "a.png", Data: []byte{1}, Inline: true, ContentID: "<a>"}), "attachments[0].content_id"},
		{"same content id twice", withAttachments(`<img src="cid:logo@x">`, png, png), "attachments[1].content_id"},
		{"empty file name", withAttachments("", transport.Attachment{Data: []byte{1}}), "attachments[0].filename"},
		{"path as file name", withAttachments("", transport.Attachment{Filename: "../etc/passwd", Data: []byte{1}}), "attachments[0].filename"},
		{"CR LF in file name", withAttachments("", transport.Attachment{Filename: "a\r\nBcc: x", Data: []byte{1}}), "attachments[0].filename"},
		{"file name not UTF-8", withAttachments("", transport.Attachment{Filename: "\xff.pdf", Data: []byte{1}}), "attachments[0].filename"},
		{"bad content type", withAttachments("", transport.Attachment{Filename: "a", ContentType: "pdf", Data: []byte{1}}), "attachments[0].content_type"},
		{"content type with CRLF", withAttachments("", transport.Attachment{Filename: "a", ContentType: "text/plain\r\nX: y", Data: []byte{1}}), "attachments[0].content_type"},
		{"empty data", withAttachments("", transport.Attachment{Filename: "a"}), "attachments[0].data"},
		{"over the encoded limit", withAttachments("", transport.Attachment{Filename: "a", Data: make([]byte, transport.MaxEncodedSize*3/4)}), "message"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.m.Validate()
			if c.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var ve *transport.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, transport.ErrInvalidMessage) {
				t.Fatalf("Validate = %v, want a ValidationError about %s", err, c.field)
			}
			if ve.Field != c.field {
				t.Errorf("Field = %q (%v), want %q", ve.Field, err, c.field)
			}
		})
	}
}

func TestCIDReferences(t *testing.T) {
	html := `<img src="cid:a@x"><div style="background:url(cid:b)"></div><a href="acid:no">x</a> CID:a@x <img src=cid:c>`
	got := strings.Join(transport.CIDReferences(html), ",")
	if want := "a@x,b,c"; got != want {
		t.Errorf("CIDReferences = %q, want %q", got, want)
	}
}

// TestEncodedSize: the encoded size counts base64's growth and line breaks,
// so that a lane's limit is on what the provider receives.
func TestEncodedSize(t *testing.T) {
	m := withAttachments("", transport.Attachment{Filename: "a.bin", Data: make([]byte, 3<<20)})
	b64 := transport.Base64Size(3 << 20)
	if b64 != 4<<20+2*((4<<20+75)/76) {
		t.Errorf("Base64Size(3 MiB) = %d", b64)
	}
	if n := m.EncodedSize(); n < b64 || n > b64+4096 {
		t.Errorf("EncodedSize = %d, want within 4 KiB above the attachment's %d bytes of base64", n, b64)
	}
}

// BenchmarkValidate is Validate on a typical transactional mail (a 2 KB
// HTML body, a text body, one extra header): every enqueue runs it, in the
// application's request.
func BenchmarkValidate(b *testing.B) {
	body := strings.Repeat("Hello, please confirm your address by opening the link below. ", 33)[:2000]
	m := &transport.Message{
		MessageID: "bench.1@shop.example",
		From:      mail.Address{Name: "Shop", Address: "noreply@shop.example"},
		To:        mail.Address{Name: "Customer", Address: "user1@example.com"},
		Subject:   "Please confirm your address",
		Text:      body,
		HTML:      "<html><body><p>" + body + "</p></body></html>",
		Headers:   []transport.Header{{Name: "List-Unsubscribe", Value: "<https://shop.example/u/1>"}},
	}
	for b.Loop() {
		if err := m.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}

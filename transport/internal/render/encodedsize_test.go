package render

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net/mail"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mailspool/mailspool/transport"
)

// checkEncodedSize fails t unless m.EncodedSize() is at least the length
// of what MIME writes for m, and for m with its domains as A-labels (what
// the SMTP adapter sends to a server without SMTPUTF8, and Amazon SES),
// and at most close to the larger: 1 KB and 1/16 above it (an address
// whose domain is not ASCII is counted as long as its A-label form may be).
func checkEncodedSize(t *testing.T, name string, m *transport.Message) {
	t.Helper()
	raw, err := MIME(m)
	if err != nil {
		t.Fatalf("%s: MIME: %v", name, err)
	}
	written, form := len(raw), "as it is"
	if a, err := ASCII(m); err == nil && a != m {
		// An A-label form that is not a valid message (an address longer
		// than 254 bytes) is refused, not written.
		if raw, err := MIME(a); err == nil && len(raw) > written {
			written, form = len(raw), "with A-labels"
		}
	}
	est := m.EncodedSize()
	t.Logf("%s: EncodedSize() = %d, the message %s is %d bytes: %d above", name, est, form, written, est-written)
	if est < written {
		t.Errorf("%s: EncodedSize() = %d, but the message %s is %d bytes (%d over the estimate)", name, est, form, written, written-est)
	}
	if limit := written + 1024 + written/16; est > limit {
		t.Errorf("%s: EncodedSize() = %d, %d above the %d bytes of the message %s (want at most %d)", name, est, est-written, written, form, limit)
	}
}

// TestEncodedSizeBoundsTheRendering: the encoded size is never below the
// bytes an adapter writes, and close to them, for the shapes that cost
// more than their length: spaces and tabs at the end of lines (written
// =20, =09), line breaks of every kind, long lines, header values and
// names that go out as RFC 2047 words, long file names continued per RFC
// 2231, many parts, binary data. The lane's limit and the SMTP SIZE check
// rely on it being an upper bound.
func TestEncodedSizeBoundsTheRendering(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	emoji := strings.Repeat("😀", 249) // 996 bytes, 4 each
	cases := map[string]func(m *transport.Message){
		"minimal":                 func(*transport.Message) {},
		"trailing spaces":         func(m *transport.Message) { m.Text = strings.Repeat("Order line item, quantity 1 \n", 4000) },
		"trailing tabs":           func(m *transport.Message) { m.Text = strings.Repeat("a\t\n\t\n", 4000) },
		"trailing space at end":   func(m *transport.Message) { m.Text = "hi " },
		"trailing space and CRLF": func(m *transport.Message) { m.Text = strings.Repeat("total \r\n", 4000) },
		"spaces only":             func(m *transport.Message) { m.Text = strings.Repeat(" ", 5000) },
		"LF body":                 func(m *transport.Message) { m.Text = strings.Repeat("line\n", 5000) },
		"CRLF body":               func(m *transport.Message) { m.Text = strings.Repeat("line\r\n", 5000) },
		"CR body":                 func(m *transport.Message) { m.Text = strings.Repeat("line\r", 5000) },
		"blank lines":             func(m *transport.Message) { m.Text = strings.Repeat("\n\r\n\r\r\n", 2000) },
		"long ASCII line":         func(m *transport.Message) { m.Text = strings.Repeat("x", 100000) },
		"long line of escapes":    func(m *transport.Message) { m.Text = strings.Repeat("=", 50000) },
		"long non-ASCII line":     func(m *transport.Message) { m.Text = strings.Repeat("Grüße aus Köln, 東京 ", 3000) },
		"lines of 75 and 76": func(m *transport.Message) {
			m.Text = strings.Repeat(strings.Repeat("y", 75)+"\n"+strings.Repeat("z", 76)+"\n"+strings.Repeat("y", 72)+"é\n", 500)
		},
		"text and html": func(m *transport.Message) {
			m.HTML = "<p>" + strings.Repeat(`<a href="https://example.com/?a=1&b=2">link</a> `, 2000) + "</p>"
		},
		"html only": func(m *transport.Message) { m.Text, m.HTML = "", "<p>hi</p>" },
		"non-ASCII subject": func(m *transport.Message) {
			m.Subject = strings.Repeat("Привет ", 76)
		},
		"emoji subject": func(m *transport.Message) { m.Subject = emoji },
		"non-ASCII headers": func(m *transport.Message) {
			for i := range 20 {
				m.Headers = append(m.Headers, transport.Header{Name: "X-Note-" + string(rune('A'+i)), Value: strings.Repeat("Привет ", 70)})
			}
		},
		"50 emoji headers with long names": func(m *transport.Message) {
			for i := range transport.MaxHeaders {
				m.Headers = append(m.Headers, transport.Header{Name: "X-" + strings.Repeat("n", 70) + string(rune('A'+i%26)) + string(rune('A'+i/26)), Value: emoji})
			}
		},
		"ASCII headers with many spaces": func(m *transport.Message) {
			for i := range 20 {
				m.Headers = append(m.Headers, transport.Header{Name: "X-Words-" + string(rune('A'+i)), Value: strings.Repeat("a ", 499)})
			}
		},
		"headers with control characters": func(m *transport.Message) {
			m.Headers = []transport.Header{{Name: "X-Ctl", Value: strings.Repeat("a\x01=?_\t", 166)}}
		},
		"non-ASCII names": func(m *transport.Message) {
			m.From.Name = strings.Repeat("Jörg, ", 140) // B: holds specials
			m.To.Name = strings.Repeat("张三 ", 142)      // Q
			m.ReplyTo = mail.Address{Name: emoji, Address: "reply@example.org"}
		},
		"quoted ASCII names": func(m *transport.Message) {
			m.From.Name = strings.Repeat(`"q" \ `, 166)
			m.To.Name = strings.Repeat("Bob Smith ", 99)
		},
		"A-labels too long to send": func(m *transport.Message) {
			m.To.Address = "kunde@" + strings.Repeat("¼.", 30) + "example"
		},
		"long addresses": func(m *transport.Message) {
			m.MessageID = ""
			m.From.Address = strings.Repeat("l", 64) + "@" + strings.Repeat(strings.Repeat("d", 62)+".", 2) + strings.Repeat("d", 62)
			m.To.Address = "jörg@[192.0.2.1]"
			m.ReplyTo.Address = strings.Repeat("ö", 32) + "@" + strings.Repeat(strings.Repeat("ü", 31)+".", 2) + "example"
		},
		"IDN domains": func(m *transport.Message) {
			m.MessageID = ""
			m.From.Address = "shop@" + strings.Repeat("㍿.", 13) + "example" // 17 bytes each as an A-label
			m.To.Address = "kunde@bücher.example"
			m.ReplyTo = mail.Address{Name: "Bücher", Address: "hilfe@" + strings.Repeat("¼.", 20) + "example"}
		},
		"long non-ASCII filenames": func(m *transport.Message) {
			for i := range 5 {
				m.Attachments = append(m.Attachments, transport.Attachment{Filename: strings.Repeat("ä", 125) + string(rune('a'+i)) + ".pdf", Data: []byte("%PDF")})
			}
		},
		"long ASCII filename": func(m *transport.Message) {
			m.Attachments = []transport.Attachment{{Filename: strings.Repeat(`a "b" (c) `, 25) + ".txt", ContentType: "text/plain; charset=utf-8", Data: []byte("x")}}
		},
		"emoji filename": func(m *transport.Message) {
			m.Attachments = []transport.Attachment{{Filename: emoji[:252], Data: []byte("x")}}
		},
		"many attachments": func(m *transport.Message) {
			for i := range transport.MaxAttachments {
				m.Attachments = append(m.Attachments, transport.Attachment{Filename: strings.Repeat("Übersicht ", 23) + string(rune('A'+i%26)) + string(rune('A'+i/26)), Data: random(i + 1)})
			}
		},
		"inline images": func(m *transport.Message) {
			m.HTML = `<img src="cid:logo@shop.example"><img src="cid:x">`
			m.Attachments = []transport.Attachment{
				{Filename: "logo.png", ContentType: "image/png", Data: random(3000), Inline: true, ContentID: "logo@shop.example"},
				{Filename: "Bild ä.png", Data: random(1), Inline: true, ContentID: "x"},
			}
		},
		"inline images and attachments": func(m *transport.Message) {
			m.HTML = `<img src="cid:` + strings.Repeat("i", 250) + `">`
			m.Attachments = []transport.Attachment{
				{Filename: "logo.png", ContentType: "image/png", Data: random(3000), Inline: true, ContentID: strings.Repeat("i", 250)},
				{Filename: "a.bin", Data: random(2)},
			}
		},
		"binary data": func(m *transport.Message) {
			for i, n := range []int{1, 2, 3, 56, 57, 58, 100000} {
				m.Attachments = append(m.Attachments, transport.Attachment{Filename: "f" + string(rune('0'+i)), Data: random(n)})
			}
		},
		"everything": func(m *transport.Message) {
			m.MessageID = ""
			m.From.Name, m.To.Name = "Müller, Jörg", "张三"
			m.ReplyTo = mail.Address{Name: "Kundendienst ✓", Address: "hilfe@bücher.example"}
			m.Subject = "Grüße — 你好 ✓ über $100 "
			m.Text = "Hallo \r\n" + strings.Repeat("Zeile mit Leerzeichen am Ende \n", 100)
			m.HTML = `<p>Grüße</p> <img src="cid:logo">` + "\t"
			m.Headers = []transport.Header{{Name: "List-Unsubscribe", Value: "<https://example.com/u/abc123>, <mailto:unsub@example.com>"}, {Name: "X-Campaign", Value: "spring — sale ✓"}}
			m.Attachments = []transport.Attachment{
				{Filename: "logo.png", ContentType: "image/png", Data: random(500), Inline: true, ContentID: "logo"},
				{Filename: "Rechnung März 2026 — Übersicht für Jörg Müller (Kundennummer 4711).pdf", Data: random(5000)},
			}
		},
	}
	for name, f := range cases {
		m := &transport.Message{MessageID: "id@example.com", From: mail.Address{Address: "a@example.com"}, To: mail.Address{Address: "b@example.net"}, Subject: "s", Text: "hi"}
		f(m)
		if err := m.Validate(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkEncodedSize(t, name, m)
	}
}

// FuzzEncodedSizeBoundsTheRendering: whatever valid message the inputs
// make, the encoded size is not below what MIME writes for it (and for its
// A-label form), nor far above.
func FuzzEncodedSizeBoundsTheRendering(f *testing.F) {
	f.Add("Your order", "Shop", "shop@example.com", "Thanks!\n", "", "X-Campaign", "spring", "", "", []byte(nil), uint8(0))
	f.Add("Grüße — 你好 ✓", "Müller, Jörg", "jörg@bücher.example", "Hallo \r\nZeile \t\n", "<p>Grüße</p>", "X-Note", strings.Repeat("Привет ", 70), "Rechnung März 2026 — Übersicht.pdf", "application/pdf", []byte("%PDF-1.7"), uint8(0xff))
	f.Add(strings.Repeat("😀", 249), strings.Repeat("张", 300), "jörg@example.com", strings.Repeat("a ", 100), strings.Repeat("=", 200), "X", strings.Repeat("a\x01 ", 300), strings.Repeat("ä", 127), "", []byte{0, 1, 2}, uint8(0x5d))
	f.Add("s", "", "a@[192.0.2.1]", strings.Repeat(" \r", 100), "", "List-Unsubscribe", "<https://example.com/u/1>", "a.bin", "", bytes.Repeat([]byte{0xff}, 57), uint8(0x8a))
	f.Fuzz(func(t *testing.T, subject, name, addr, text, html, hname, hvalue, filename, contentType string, data []byte, shape uint8) {
		m := &transport.Message{
			MessageID: "id@example.com",
			From:      mail.Address{Name: name, Address: addr},
			To:        mail.Address{Name: hvalue, Address: "b@example.net"},
			Subject:   subject,
			Text:      text,
			HTML:      html,
			Headers:   []transport.Header{{Name: hname, Value: hvalue}},
		}
		if shape&1 != 0 {
			m.MessageID = ""
		}
		if shape&2 != 0 {
			m.ReplyTo = mail.Address{Name: subject, Address: "reply@" + addr[strings.LastIndexByte(addr, '@')+1:]}
		}
		if shape&4 != 0 { // ten headers
			for i := range 9 {
				m.Headers = append(m.Headers, transport.Header{Name: "X-" + string(rune('A'+i)), Value: subject})
			}
		}
		files := int(shape>>3&3) * 3 // 0, 3, 6 or 9 files
		for i := range files {
			a := transport.Attachment{Filename: filename + string(rune('a'+i)), ContentType: contentType, Data: append([]byte{byte(i)}, data...)}
			if i%3 == 1 && shape&32 != 0 {
				a.Inline, a.ContentID = true, "c"+string(rune('a'+i))
				m.HTML += `<img src="cid:` + a.ContentID + `">`
			}
			m.Attachments = append(m.Attachments, a)
		}
		if err := repair(m); err != nil {
			t.Skip(err)
		}
		checkEncodedSize(t, "fuzz", m)
	})
}

// repair makes m valid by setting each field Validate refuses to a plain
// value, so that the fuzzer's inputs mostly make a message; it returns
// Validate's error when that does not do.
func repair(m *transport.Message) error {
	for range 100 {
		err := m.Validate()
		var ve *transport.ValidationError
		if err == nil || !errors.As(err, &ve) {
			return err
		}
		field, _, _ := strings.Cut(ve.Field, ".")
		sub := strings.TrimPrefix(ve.Field, field)
		switch {
		case field == "from" && sub == ".name":
			m.From.Name = ""
		case field == "from":
			m.From.Address = "a@example.com"
		case field == "to" && sub == ".name":
			m.To.Name = ""
		case field == "reply_to":
			m.ReplyTo = mail.Address{}
		case field == "subject":
			m.Subject = "s"
		case field == "text":
			m.Text = ""
		case field == "html":
			m.HTML = ""
			m.Attachments = slices.DeleteFunc(m.Attachments, func(a transport.Attachment) bool { return a.Inline })
		case field == "body":
			m.Text = "hi"
		case strings.HasPrefix(field, "headers["):
			i, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(field, "headers["), "]"))
			if sub == ".value" {
				m.Headers[i].Value = ""
			} else {
				m.Headers[i].Name = "X-Fuzz-" + strconv.Itoa(i)
			}
		case strings.HasPrefix(field, "attachments[") && (sub == ".filename" || sub == ".content_type"):
			i, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(field, "attachments["), "]"))
			if sub == ".filename" {
				m.Attachments[i].Filename = "f" + strconv.Itoa(i)
			} else {
				m.Attachments[i].ContentType = ""
			}
		default:
			return err
		}
	}
	return m.Validate()
}

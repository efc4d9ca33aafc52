package conformance

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	gomail "github.com/wneessen/go-mail"
)

func readEML(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseMIMEGmailAlternative(t *testing.T) {
	t.Parallel()
	r, err := ParseMIME(readEML(t, "gmail-alternative.eml"))
	noErr(t, err)
	eq(t, "Grüße — 你好 ✓ über $100", r.Subject)
	eq(t, "joerg@example.com", r.From)
	eq(t, "Jörg Müller", r.FromName)
	eq(t, fmt.Sprint([]string{"zhang@example.net", "bob@example.org"}), fmt.Sprint(r.To))
	eq(t, "张三", r.ToName)
	eq(t, "<CAF=q8Xk3mZ+7yQ@mail.gmail.com>", r.Header.Get("Message-Id"))
	// Folded header lines are unfolded.
	eq(t, "<mailto:unsub@example.com?subject=unsubscribe>, <https://example.com/u/abc>", r.Header.Get("List-Unsubscribe"))
	// Soft line breaks and =XX escapes undone, CRLF → \n, "=2E" line kept.
	eq(t, "Hallo Jörg,\n\nthe price is 1+1=2 and this line is deliberately long so that the quoted-printable encoder has to wrap it with a soft line break somewhere.\n.\nFrom here on: 你好\n", r.Text)
	eq(t, "<div dir=\"ltr\">Hallo Jörg,<div><br></div><div>the price is 1+1=2 — 你好</div></div>\n", r.HTML)
}

func TestParseMIMEThunderbirdMixed(t *testing.T) {
	t.Parallel()
	r, err := ParseMIME(readEML(t, "thunderbird-mixed.eml"))
	noErr(t, err)
	// Encoded words in two charsets next to plain words.
	eq(t, "Grüße aus Köln", r.Subject)
	eq(t, "Björn", r.FromName)
	eq(t, fmt.Sprint([]string{"plain@example.net"}), fmt.Sprint(r.To))
	eq(t, "", r.ToName)
	eq(t, "replies@example.org", r.Header.Get("Reply-To"))
	// base64 text inside multipart/alternative inside multipart/mixed.
	eq(t, "Plain body line one\nline two with ümlaut\n", r.Text)
	eq(t, "<html><body><p>Plain body line one<br>line two with ümlaut</p></body></html>\n", r.HTML)
}

func TestParseMIMELatin1SinglePart(t *testing.T) {
	t.Parallel()
	r, err := ParseMIME(readEML(t, "latin1-single.eml"))
	noErr(t, err)
	eq(t, "Straße", r.Subject)
	eq(t, "Ana", r.ToName)
	eq(t, "Grüße aus der Straße, ein sehr langer Satz der umgebrochen werden muss.\n", r.Text)
	eq(t, "", r.HTML)
}

func TestParseMIMESkipsLeadingAttachment(t *testing.T) {
	t.Parallel()
	raw := strings.ReplaceAll(`From: a@example.com
To: b@example.com
Subject: plain
Content-Type: multipart/mixed; boundary=XX

--XX
Content-Type: text/plain
Content-Disposition: attachment; filename=a.txt

attached
--XX
Content-Type: text/plain

body
--XX--
`, "\n", "\r\n")
	r, err := ParseMIME([]byte(raw))
	noErr(t, err)
	eq(t, "body", r.Text)
}

func TestParseMIMEErrors(t *testing.T) {
	t.Parallel()
	for name, raw := range map[string]string{
		"malformed header":   "not a header line\r\n\r\nx",
		"bad from":           "From: not an address\r\n\r\nx",
		"bad content type":   "Content-Type: text/plain; charset\r\n\r\nx",
		"no boundary":        "Content-Type: multipart/mixed\r\n\r\nx",
		"bad encoding":       "Content-Transfer-Encoding: uuencode\r\n\r\nx",
		"bad base64":         "Content-Transfer-Encoding: base64\r\n\r\n!!!!\r\n",
		"unknown charset":    "Content-Type: text/plain; charset=koi8-r\r\n\r\nx",
		"unterminated parts": "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\nx",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseMIME([]byte(raw))
			if err == nil || !strings.HasPrefix(err.Error(), "conformance: ") {
				t.Fatalf("ParseMIME: got error %v, want one starting with \"conformance: \"", err)
			}
		})
	}
}

// TestParseMIMEGoMail round-trips the suite's own message through go-mail,
// the library the SMTP adapter writes MIME with, in both transfer encodings.
func TestParseMIMEGoMail(t *testing.T) {
	t.Parallel()
	m := intactMessage()
	for _, enc := range []gomail.Encoding{gomail.EncodingQP, gomail.EncodingB64} {
		t.Run(string(enc), func(t *testing.T) {
			msg := gomail.NewMsg(gomail.WithEncoding(enc), gomail.WithNoDefaultUserAgent())
			for _, err := range []error{
				msg.FromFormat(m.From.Name, m.From.Address),
				msg.AddToFormat(m.To.Name, m.To.Address),
				msg.ReplyToFormat(m.ReplyTo.Name, m.ReplyTo.Address),
			} {
				noErr(t, err)
			}
			msg.Subject(m.Subject)
			msg.SetMessageIDWithValue(m.MessageID)
			for _, h := range m.Headers {
				msg.SetGenHeader(gomail.Header(h.Name), h.Value)
			}
			msg.SetBodyString(gomail.TypeTextPlain, m.Text)
			msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
			var buf bytes.Buffer
			_, err := msg.WriteTo(&buf)
			noErr(t, err)

			r, err := ParseMIME(buf.Bytes())
			noErr(t, err)
			for _, d := range compareReceived(m, r) {
				t.Error(d)
			}
		})
	}
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func eq[T comparable](t *testing.T, want, got T) {
	t.Helper()
	if want != got {
		t.Errorf("got %#v, want %#v", got, want)
	}
}

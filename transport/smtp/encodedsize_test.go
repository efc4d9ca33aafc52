package smtp_test

import (
	"net/mail"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/internal/render"
)

// TestEncodedSizeBoundsWhatTheServerReceives: what the server reads after
// DATA is what render.MIME writes for the mail (for its A-label form when
// the server has no SMTPUTF8), plus the line end that finishes an
// unfinished last line; EncodedSize, which the SIZE check before MAIL FROM
// compares with the server's limit, is not below it.
func TestEncodedSizeBoundsWhatTheServerReceives(t *testing.T) {
	t.Parallel()
	mails := map[string]func(m *transport.Message){
		"trailing spaces": func(m *transport.Message) {
			m.Text = strings.Repeat("Order line item, quantity 1 \n", 500) + "total "
		},
		"lines starting with a dot": func(m *transport.Message) { m.Text = strings.Repeat(".\n..x\n", 300) },
		"non-ASCII headers and names": func(m *transport.Message) {
			m.MessageID = ""
			m.From.Name = "Müller, Jörg"
			m.ReplyTo = mail.Address{Name: strings.Repeat("Kundendienst ✓ ", 20), Address: "hilfe@bücher.example"}
			m.To.Address = "kunde@bücher.example"
			m.Subject = strings.Repeat("Grüße ", 100)
			for i := range 10 {
				m.Headers = append(m.Headers, transport.Header{Name: "X-Note-" + string(rune('A'+i)), Value: strings.Repeat("Привет ", 70)})
			}
		},
		"attachments": func(m *transport.Message) {
			m.HTML = `<p>Grüße</p><img src="cid:logo">`
			m.Attachments = []transport.Attachment{
				{Filename: "logo.png", ContentType: "image/png", Data: []byte("\x89PNG\r\n\x1a\n"), Inline: true, ContentID: "logo"},
				{Filename: strings.Repeat("Rechnung März ", 15) + ".pdf", Data: []byte(strings.Repeat("%PDF-1.7\n", 1000))},
			}
		},
	}
	for _, utf8 := range []bool{true, false} {
		s := startServer(t, script{utf8: utf8})
		tr := open(t, s.url(""))
		for name, f := range mails {
			m := message()
			f(m)
			_, err := send(t, tr, m)
			require.NoError(t, err, name)
			got := s.mail()
			raw := got[len(got)-1].raw

			form := m
			if !utf8 {
				form, err = render.ASCII(m)
				require.NoError(t, err, name)
			}
			mime, err := render.MIME(form)
			require.NoError(t, err, name)
			want := len(mime)
			if !strings.HasSuffix(string(mime), "\r\n") {
				want += 2
			}
			assert.Equal(t, want, len(raw), "%s (SMTPUTF8 %v): the server got %d bytes, render.MIME writes %d", name, utf8, len(raw), len(mime))
			assert.GreaterOrEqual(t, m.EncodedSize(), len(raw), "%s (SMTPUTF8 %v): EncodedSize below what the server got", name, utf8)
		}
	}
}

package fake

import (
	"context"
	"net/mail"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/transport"
)

func testMessage(to string) *transport.Message {
	return &transport.Message{
		From:    mail.Address{Name: "Shop", Address: "shop@example.com"},
		To:      mail.Address{Address: to},
		Subject: "order shipped",
		Text:    "Your order ships today.\n",
	}
}

// TestFixtureOutcomes sends one message through every step and checks what
// classify made of the recorded response.
func TestFixtureOutcomes(t *testing.T) {
	t.Parallel()
	type want struct {
		kind       transport.Kind
		code       int
		enhanced   string
		retryAfter time.Duration
		maybe      bool
		detail     string // a substring of Detail
	}
	tests := map[string]want{
		"ok":             {kind: transport.Sent},
		"421":            {transport.Temporary, 421, "4.7.0", 0, false, "unusual rate"},
		"450":            {transport.Temporary, 450, "4.2.1", 0, false, "receiving mail at a rate"},
		"451":            {transport.Temporary, 451, "4.3.0", 0, false, "queue file write error"},
		"452":            {transport.Temporary, 452, "4.2.2", 0, false, "is over quota"},
		"550":            {transport.Permanent, 550, "5.1.1", 0, false, "does not exist"},
		"552":            {transport.Permanent, 552, "5.2.2", 0, false, "Mailbox full"},
		"553":            {transport.Permanent, 553, "5.1.3", 0, false, "not a valid RFC 5321 address"},
		"554":            {transport.Permanent, 554, "5.7.1", 0, false, "spam"},
		"ses-smtp-454":   {transport.Temporary, 454, "", 0, false, "Maximum sending rate exceeded"},
		"http-429":       {transport.Temporary, 429, "", 7 * time.Second, false, "Too Many Requests"},
		"http-401":       {transport.Connection, 401, "", 0, false, "authorization grant is invalid"},
		"http-500":       {transport.Temporary, 500, "", 0, false, "internal error"},
		"ses-throttling": {transport.Temporary, 429, "", 0, false, "Maximum sending rate exceeded"},
		"sendgrid-429":   {transport.Temporary, 429, "", 0, false, "too many requests"},
		"refused":        {transport.Connection, 0, "", 0, false, "connection refused"},
		"tls":            {transport.Connection, 0, "", 0, false, "tls"},
		"timeout":        {transport.Connection, 0, "", 0, false, "timeout"},
		"hang":           {transport.Connection, 0, "", 0, false, "timeout"},
		"stall":          {transport.Temporary, 0, "", 0, true, "timeout"},
	}
	for _, step := range stepNames() {
		w, ok := tests[step]
		if !ok {
			// Whether a 5.2.2 over quota is transient is classify's call.
			assert.Equal(t, "gmail-552", step, "step %q has no expected outcome in this test", step)
			continue
		}
		t.Run(step, func(t *testing.T) {
			tr := New(&Options{Script: []string{step}, Timeout: 10 * time.Millisecond})
			r, err := tr.Send(context.Background(), testMessage("rcpt@example.net"))
			require.Equal(t, w.kind, transport.KindOf(err), "KindOf (err: %v)", err)
			if err == nil {
				assert.NotEmpty(t, r.MessageID, "Receipt: an id")
				assert.Equal(t, "2.0.0 OK  1733130645 d2e1a72fcca58-7258ac49b3fsi1234567b3a.220 - gsmtp", r.Response, "Receipt: Gmail's 250 text")
				return
			}
			var te *transport.Error
			require.ErrorAs(t, err, &te)
			assert.Equal(t, w.code, te.Code, "code")
			assert.Equal(t, w.enhanced, te.Enhanced, "enhanced code")
			assert.Equal(t, w.retryAfter, te.RetryAfter, "retry after")
			assert.Equal(t, w.maybe, te.MaybeDelivered, "maybe delivered")
			assert.Contains(t, te.Detail, w.detail, "Detail")
		})
	}
}

// TestFixtureMultiLineReply checks that a multi-line fixture reaches
// classify with CRLF line ends, as a server sends it.
func TestFixtureMultiLineReply(t *testing.T) {
	t.Parallel()
	lines := strings.Split(fixtures["550"].reply, "\r\n")
	require.Len(t, lines, 4, "reply lines %q: want four 550 lines joined by CRLF", lines)
	assert.True(t, strings.HasPrefix(lines[0], "550-5.1.1 "), "first line %q", lines[0])
	assert.True(t, strings.HasPrefix(lines[3], "550 5.1.1 "), "last line %q", lines[3])
}

func TestParseFixtureErrors(t *testing.T) {
	t.Parallel()
	for name, data := range map[string]string{
		"no blank line":    "kind: hang\n",
		"not key value":    "kind hang\n\n",
		"unknown header":   "kind: hang\nsource: x\n\n",
		"unknown kind":     "kind: smtp\n\n250 ok\n",
		"no kind":          "note: x\n\npayload\n",
		"empty reply":      "kind: smtp-reply\n\n\n",
		"bad http":         "kind: http\n\nnot a status line\n",
		"bad http headers": "kind: http\n\nHTTP/1.1 200 OK\nno colon\n\n",
	} {
		t.Run(name, func(t *testing.T) {
			f, err := parseFixture("x", []byte(data))
			assert.Error(t, err, "parseFixture = %+v, want an error", f)
		})
	}
	_, err := loadFixtures(fstest.MapFS{"testdata/bad.resp": {Data: []byte("kind: nope\n\n")}})
	assert.ErrorContains(t, err, "testdata/bad.resp", "loadFixtures error: want one naming the file")
}

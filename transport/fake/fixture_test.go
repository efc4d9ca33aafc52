package fake

import (
	"context"
	"errors"
	"net/mail"
	"strings"
	"testing"
	"testing/fstest"
	"time"

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
			if step != "gmail-552" {
				t.Errorf("step %q has no expected outcome in this test", step)
			}
			continue
		}
		t.Run(step, func(t *testing.T) {
			tr := New(&Options{Script: []string{step}, Timeout: 10 * time.Millisecond})
			r, err := tr.Send(context.Background(), testMessage("rcpt@example.net"))
			if got := transport.KindOf(err); got != w.kind {
				t.Fatalf("KindOf = %s, want %s (err: %v)", got, w.kind, err)
			}
			if err == nil {
				if r.MessageID == "" || r.Response != "2.0.0 OK  1733130645 d2e1a72fcca58-7258ac49b3fsi1234567b3a.220 - gsmtp" {
					t.Errorf("Receipt = %+v, want an id and Gmail's 250 text", r)
				}
				return
			}
			var te *transport.Error
			if !errors.As(err, &te) {
				t.Fatalf("no *transport.Error in %v", err)
			}
			if te.Code != w.code || te.Enhanced != w.enhanced || te.RetryAfter != w.retryAfter || te.MaybeDelivered != w.maybe {
				t.Errorf("got code %d enhanced %q retry %v maybe %v, want %d %q %v %v",
					te.Code, te.Enhanced, te.RetryAfter, te.MaybeDelivered, w.code, w.enhanced, w.retryAfter, w.maybe)
			}
			if !strings.Contains(te.Detail, w.detail) {
				t.Errorf("Detail = %q, want it to contain %q", te.Detail, w.detail)
			}
		})
	}
}

// TestFixtureMultiLineReply checks that a multi-line fixture reaches
// classify with CRLF line ends, as a server sends it.
func TestFixtureMultiLineReply(t *testing.T) {
	t.Parallel()
	lines := strings.Split(fixtures["550"].reply, "\r\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "550-5.1.1 ") || !strings.HasPrefix(lines[3], "550 5.1.1 ") {
		t.Errorf("reply lines = %q, want four 550 lines joined by CRLF", lines)
	}
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
			if f, err := parseFixture("x", []byte(data)); err == nil {
				t.Errorf("parseFixture = %+v, want an error", f)
			}
		})
	}
	_, err := loadFixtures(fstest.MapFS{"testdata/bad.resp": {Data: []byte("kind: nope\n\n")}})
	if err == nil || !strings.Contains(err.Error(), "testdata/bad.resp") {
		t.Errorf("loadFixtures error = %v, want one naming the file", err)
	}
}

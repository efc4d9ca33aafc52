package classify

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mailspool/mailspool/transport"
)

// FuzzSMTPReply checks that SMTPReply never panics, is deterministic, and
// always gives a well-formed result: nil only for a 2xx/3xx reply, a known
// kind, a valid enhanced code or none, and a Detail that is one short line.
func FuzzSMTPReply(f *testing.F) {
	for _, tc := range smtpReplies {
		f.Add(tc.reply)
	}
	for _, tc := range recordedReplies {
		f.Add(tc.reply)
	}
	for _, s := range []string{"550 \xff\xfe", "550-\r\n550 ", "4\n", "550 5.1.1\r\n551 5.1.1 x", "250-ok\n550 no", "550 try again in 9999999999999 hours"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, reply string) {
		a, b := SMTPReply(reply), SMTPReply(reply)
		if a == nil || b == nil {
			if a != nil || b != nil {
				t.Fatalf("not deterministic for %q: %v / %v", reply, a, b)
			}
			if code, _, ok := parseReply(reply); !ok || code >= 400 {
				t.Fatalf("nil for %q", reply)
			}
			return
		}
		var x, y *transport.Error
		if !errors.As(a, &x) || !errors.As(b, &y) {
			t.Fatalf("not a *transport.Error for %q: %T", reply, a)
		}
		if x.Kind != y.Kind || x.Code != y.Code || x.Enhanced != y.Enhanced || x.RetryAfter != y.RetryAfter || x.Detail != y.Detail {
			t.Fatalf("not deterministic for %q: %+v / %+v", reply, x, y)
		}
		if x.Kind != transport.Temporary && x.Kind != transport.Permanent && x.Kind != transport.Connection {
			t.Fatalf("kind %v for %q", x.Kind, reply)
		}
		if x.Code != 0 && (x.Code < 400 || x.Code > 599) {
			t.Fatalf("code %d for %q", x.Code, reply)
		}
		if _, ok := parseEnhanced(x.Enhanced); x.Enhanced != "" && !ok {
			t.Fatalf("enhanced %q for %q", x.Enhanced, reply)
		}
		if x.RetryAfter < 0 || x.RetryAfter > MaxRetryAfter {
			t.Fatalf("retry %v for %q", x.RetryAfter, reply)
		}
		if strings.ContainsAny(x.Detail, "\r\n") || len(x.Detail) > maxDetail || !utf8.ValidString(x.Detail) {
			t.Fatalf("detail %q for %q", x.Detail, reply)
		}
		if x.Rule == "" || x.Rule != y.Rule || x.Scope != y.Scope {
			t.Fatalf("rule %q/%q, scope %v/%v for %q", x.Rule, y.Rule, x.Scope, y.Scope, reply)
		}
		if x.Scope == transport.ScopeRecipient && x.Kind == transport.Connection {
			t.Fatalf("a reply about one recipient is Connection: %q (%s)", reply, x.Rule)
		}
	})
}

// FuzzError checks that Error never panics on any error text (the search
// for an embedded reply slices it) and is deterministic.
func FuzzError(f *testing.F) {
	for _, s := range []string{
		`sending SMTP RCPT TO command: 550 "5.1.1 no such user", affected recipient(s): <x@example.com>`,
		"SMTP AUTH failed: 535 5.7.8 Error: authentication failed",
		"SMTP error 421: Too many connections",
		"dial tcp 10.0.0.550:25: connect: connection refused",
		`: 550 "unterminated`, "smtp error 4", ", 450 \"\\x\"", "\n550-",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		a, b := asError(Error(errors.New(text))), asError(Error(errors.New(text)))
		if a == nil || b == nil {
			t.Fatalf("not classified: %q", text)
		}
		if a.Kind != b.Kind || a.Code != b.Code || a.Enhanced != b.Enhanced || a.Detail != b.Detail {
			t.Fatalf("not deterministic for %q: %+v / %+v", text, a, b)
		}
		if strings.ContainsAny(a.Detail, "\r\n") || len(a.Detail) > maxDetail {
			t.Fatalf("detail %q for %q", a.Detail, text)
		}
	})
}

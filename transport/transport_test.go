package transport

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"strings"
	"testing"
	"time"
)

func validMessage() *Message {
	return &Message{
		From:    mail.Address{Name: "Shop", Address: "noreply@shop.example"},
		To:      mail.Address{Name: "Jürgen", Address: "j@example.com"},
		Subject: "Grüße",
		Text:    "hi",
		Headers: []Header{{Name: "List-Unsubscribe", Value: "<https://shop.example/u>"}},
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	if err := validMessage().Validate(); err != nil {
		t.Fatalf("valid message: %v", err)
	}
	cases := []struct {
		field string
		edit  func(m *Message)
	}{
		{"from.address", func(m *Message) { m.From.Address = "" }},
		{"to.address", func(m *Message) { m.To.Address = "not an address" }},
		{"to.address", func(m *Message) { m.To.Address = "Eve <eve@example.com>" }},
		{"to.address", func(m *Message) { m.To.Address = "a@example.com\r\nRCPT TO:<b@example.com>" }},
		{"to.name", func(m *Message) { m.To.Name = "Eve\r\nBcc: all@example.com" }},
		// NUL in a body: no mail holds one, and PostgreSQL refuses it.
		{"text", func(m *Message) { m.Text = "before\x00after" }},
		{"html", func(m *Message) { m.HTML = "<p>\x00</p>" }},
		{"reply_to.address", func(m *Message) { m.ReplyTo.Address = "@" }},
		// Bidirectional controls make an address or name display as
		// something else than it is.
		{"to.name", func(m *Message) { m.To.Name = "Support \u202Emoc.knab" }},
		{"from.name", func(m *Message) { m.From.Name = "Bank \u2066x\u2069" }},
		{"to.address", func(m *Message) { m.To.Address = "j\u202E@example.com" }},
		{"reply_to.address", func(m *Message) { m.ReplyTo.Address = "\u2067a@example.com" }},
		// Format characters (Cf) are invisible: the address would look
		// like, and be delivered as, another one.
		{"to.address", func(m *Message) { m.To.Address = "victim@ex\u200Bample.com" }},
		{"to.address", func(m *Message) { m.To.Address = "victim@ex\u00ADample.com" }},
		{"to.address", func(m *Message) { m.To.Address = "victim@\uFEFFexample.com" }},
		{"from.address", func(m *Message) { m.From.Address = "no\u2060reply@example.com" }},
		{"reply_to.address", func(m *Message) { m.ReplyTo.Address = "help\u200D@example.com" }},
		// Domain labels must be host name labels.
		{"to.address", func(m *Message) { m.To.Address = "j@-example.com" }},
		{"to.address", func(m *Message) { m.To.Address = "j@example-.com" }},
		{"to.address", func(m *Message) { m.To.Address = "j@mail.-x.example" }},
		{"to.address", func(m *Message) { m.To.Address = "j@" + strings.Repeat("a", 64) + ".example" }},
		{"subject", func(m *Message) { m.Subject = "hi\nBcc: x@example.com" }},
		{"subject", func(m *Message) { m.Subject = "nul\x00" }},
		{"subject", func(m *Message) { m.Subject = strings.Repeat("s", MaxLineLength+1) }},
		{"subject", func(m *Message) { m.Subject = "\xff" }},
		{"body", func(m *Message) { m.Text, m.HTML = "", "" }},
		{"html", func(m *Message) { m.HTML = "\xfe" }},
		{"headers[0].name", func(m *Message) { m.Headers[0].Name = "X Bad" }},
		{"headers[0].name", func(m *Message) { m.Headers[0].Name = "Bcc" }},
		{"headers[0].name", func(m *Message) { m.Headers[0].Name = "X-A\r\nBcc" }},
		{"headers[1].name", func(m *Message) { m.Headers = append(m.Headers, Header{Name: "list-unsubscribe", Value: "x"}) }},
		{"headers[0].value", func(m *Message) { m.Headers[0].Value = "v\r\nBcc: x@example.com" }},
		{"message_id", func(m *Message) { m.MessageID = "<abc@example.com>" }},
		{"message_id", func(m *Message) { m.MessageID = "no-at-sign" }},
		{"message", func(m *Message) { m.Text = strings.Repeat("x", MaxMessageSize) }},
		{"headers", func(m *Message) {
			for i := range MaxHeaders {
				m.Headers = append(m.Headers, Header{Name: fmt.Sprintf("X-N%d", i), Value: "v"})
			}
		}},
	}
	for _, c := range cases {
		m := validMessage()
		c.edit(m)
		err := m.Validate()
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: want a *ValidationError, got %v", c.field, err)
			continue
		}
		if ve.Field != c.field {
			t.Errorf("want field %s, got %v", c.field, err)
		}
		if !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("%s: %v does not match ErrInvalidMessage", c.field, err)
		}
	}
	for _, ok := range []string{"j@a-b.example", "j@" + strings.Repeat("a", 63) + ".example", "j@bücher.example", "j@[192.0.2.1]", "j@xn--bcher-kva.example"} {
		m := validMessage()
		m.To.Address = ok
		if err := m.Validate(); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	var nilMsg *Message
	if err := nilMsg.Validate(); err == nil {
		t.Error("nil message validated")
	}
}

func TestErrorText(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  *Error
		want string
	}{
		{&Error{Kind: Permanent, Code: 550, Enhanced: "5.1.1", Detail: "no such user", Err: errors.New(`550 "5.1.1 no such user"`)}, "permanent: 550 5.1.1 no such user"},
		{&Error{Kind: Connection, Detail: "connection refused", Err: errors.New("dial tcp 127.0.0.1:25: connect: connection refused")}, "connection: connection refused: dial tcp 127.0.0.1:25: connect: connection refused"},
		{&Error{Kind: Temporary, MaybeDelivered: true, Detail: "timeout after DATA"}, "temporary: timeout after DATA (maybe delivered)"},
		{&Error{Kind: Temporary, Code: 429, RetryAfter: time.Second}, "temporary: 429"},
	}
	for _, c := range cases {
		if got := c.err.Error(); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
	cause := errors.New("cause")
	if !errors.Is(fmt.Errorf("w: %w", &Error{Kind: Temporary, Err: cause}), cause) {
		t.Error("Unwrap does not reach the cause")
	}
}

// The names are stored in the queue's last_kind column: they never change.
func TestKindNames(t *testing.T) {
	t.Parallel()
	for k, want := range map[Kind]string{Sent: "sent", Temporary: "temporary", Permanent: "permanent", Connection: "connection"} {
		if got := k.String(); got != want {
			t.Errorf("Kind %d String() = %q, want the stored name %q", k, got, want)
		}
	}
	if Kind(9).String() != "kind(9)" {
		t.Error(Kind(9).String())
	}
}

// The names are stored in the queue's last_scope column: they never change,
// and the numbers are append-only.
func TestScopeNames(t *testing.T) {
	t.Parallel()
	for s, want := range map[Scope]string{ScopeTransient: "transient", ScopeRecipient: "recipient", ScopeMessage: "message", ScopeSender: "sender", ScopeLane: "lane"} {
		if got := s.String(); got != want {
			t.Errorf("Scope %d String() = %q, want the stored name %q", s, got, want)
		}
		if back, err := ParseScope(want); err != nil || back != s {
			t.Errorf("ParseScope(%q) = %v, %v", want, back, err)
		}
	}
	if Scope(9).String() != "scope(9)" {
		t.Error(Scope(9).String())
	}
	if _, err := ParseScope("Recipient"); err == nil || !strings.Contains(err.Error(), `unknown scope "Recipient"`) {
		t.Errorf("ParseScope(Recipient): %v", err)
	}
	var zero Scope
	if zero != ScopeTransient || ScopeOf(nil) != ScopeTransient || ScopeOf(errors.New("x")) != ScopeTransient {
		t.Error("the zero and the unclassified scope must be transient")
	}
	if got := ScopeOf(fmt.Errorf("wrapped: %w", &Error{Kind: Permanent, Scope: ScopeRecipient})); got != ScopeRecipient {
		t.Errorf("ScopeOf(wrapped) = %v", got)
	}
}

// An Error built without a kind must never read as a success.
func TestZeroKindIsTemporary(t *testing.T) {
	t.Parallel()
	var k Kind
	if k != Temporary {
		t.Errorf("zero Kind is %v, want temporary", k)
	}
	if got := KindOf(&Error{Err: errors.New("unclassified")}); got != Temporary {
		t.Errorf("KindOf(&Error{} without a Kind) = %v, want temporary", got)
	}
}

func TestMuxRegisterPanics(t *testing.T) {
	t.Parallel()
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", name)
			}
		}()
		f()
	}
	var m Mux
	m.Register("x", opener{})
	mustPanic("duplicate", func() { m.Register("X", opener{}) })
	mustPanic("nil", func() { m.Register("y", nil) })
	mustPanic("empty", func() { m.Register("", opener{}) })
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"smtp://u:secret@h:587":       "smtp://u:xxxxx@h:587",
		"smtp://u:sec%zzret@h:587/x":  "smtp://xxxxx@h:587/x",
		"sendgrid://:key@default?x=1": "sendgrid://:xxxxx@default?x=1",
		"fake://?script=ok":           "fake://?script=ok",
		"sqlite:mailspool.db":         "sqlite:mailspool.db",
		// Passwords that break the URL syntax.
		"mysql://root:s3cret/PW@127.0.0.1:3306/app": "mysql://xxxxx@127.0.0.1:3306/app",
		"mysql://root:pa#ss@127.0.0.1/app":          "mysql://xxxxx@127.0.0.1/app",
		"mysql://root:12#34@127.0.0.1/app":          "mysql://xxxxx@127.0.0.1/app",
		"mysql://root:pa?ss@127.0.0.1/app?tls=true": "mysql://xxxxx@127.0.0.1/app?tls=true",
		"smtp://user:pa@ss/word@h:587":              "smtp://xxxxx@h:587",
		// Not URLs at all, with credentials.
		"root:pw@tcp(127.0.0.1:3306)/app": "xxxxx@tcp(127.0.0.1:3306)/app",
		"user:pw@host":                    "xxxxx@host",
		// Composites: each member redacted, the options kept.
		"failover(smtp://u:pw1@a.example:587, sendgrid://?api_key=SG.k&x=1 ; probe=5s)": "failover(smtp://u:xxxxx@a.example:587, sendgrid://?api_key=xxxxx&x=1 ; probe=5s)",
		"roundrobin(fake://?script=ok,550, smtp://u:p%40ss@b; weights=3,1)":             "roundrobin(fake://?script=ok,550, smtp://u:xxxxx@b; weights=3,1)",
		"failover(smtp://a:b@c": "xxxxx@c",
		// Secrets given as parameters.
		"smtp://h?password=hunter2&password_env=P": "smtp://h?password=xxxxx&password_env=P",
		"sendgrid://default?api_key=SG.x":          "sendgrid://default?api_key=xxxxx",
		// A query value that is a URL or a DSN with user info: the whole
		// user info goes, as written or escaped.
		"sendgrid://apikey:K@eu?endpoint=https://proxyuser:S3CRET@proxy.example":              "sendgrid://apikey:xxxxx@eu?endpoint=https://xxxxx@proxy.example",
		"sendgrid://apikey:K@eu?endpoint=https%3A%2F%2Fproxyuser%3AS3CRET%40proxy.example":    "sendgrid://apikey:xxxxx@eu?endpoint=https%3A%2F%2Fxxxxx%40proxy.example",
		"ses://AKIA:s@default?endpoint=https://S3CRET@proxy.example&region=eu-west-1":         "ses://AKIA:xxxxx@default?endpoint=https://xxxxx@proxy.example&region=eu-west-1",
		"sendgrid://apikey:K@eu?endpoint=https://u:S3C/R?E@T@proxy.example/p?token=S3CRET#x":  "sendgrid://apikey:xxxxx@eu?endpoint=https://xxxxx@proxy.example/p?token=xxxxx#xxxxx",
		"smtp://u:p@h?ca_file=root:S3CRET@tcp(db)/app":                                        "smtp://u:xxxxx@h?ca_file=xxxxx@tcp(db)/app",
		"smtp://u:p@h?ca_file=https://h.example/ca?token=S3CRET":                              "smtp://u:xxxxx@h?ca_file=https://h.example/ca?token=xxxxx",
		"sendgrid://apikey:K@eu?endpoint=https://u:S3C&RET@proxy.example&timeout=5s":          "sendgrid://apikey:xxxxx@eu?endpoint=xxxxx",
		"sendgrid://apikey:K@eu?endpoint=https://u:S3C#RET@proxy.example":                     "sendgrid://apikey:xxxxx@eu?endpoint=xxxxx#xxxxx",
		"sendgrid://apikey:K@eu?endpoint=https%3A%2F%2Fu%3AS3C&x=RET%40proxy.example":         "sendgrid://apikey:xxxxx@eu?endpoint=xxxxx",
		"sendgrid://apikey:K@eu?endpoint=https%3A%2F%2Fu%3AS3C%40proxy.example%zz&timeout=5s": "sendgrid://apikey:xxxxx@eu?endpoint=https%3A%2F%2Fxxxxx%40proxy.example%25zz&timeout=5s",
		// Values that are not URLs with user info are kept as written.
		"smtp://u:p@h?helo=a@b.example":                                          "smtp://u:xxxxx@h?helo=a@b.example",
		"sendgrid://apikey:K@default?endpoint=http://127.0.0.1:8025/&timeout=5s": "sendgrid://apikey:xxxxx@default?endpoint=http://127.0.0.1:8025/&timeout=5s",
		"sendgrid://apikey:K@default?endpoint=https%3A%2F%2Fproxy.example%2Fsg":  "sendgrid://apikey:xxxxx@default?endpoint=https%3A%2F%2Fproxy.example%2Fsg",
		// Found by FuzzRedact.
		"smtp://0?@&token=hunter2":     "smtp://xxxxx@&token=xxxxx",
		"smtp://= ?password=hunter2":   "smtp://= ?password=xxxxx",
		"smtp://h?a#b&token=hunter2":   "smtp://h?a#xxxxx",
		"root:S3://@tcp(127.0.0.1)/db": "xxxxx@tcp(127.0.0.1)/db",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzDotAtomAddress holds the line Validate's fast path stands on: every
// address dotAtomAddress takes is one net/mail parses back to itself, so
// skipping the parser for it changes no answer.
func FuzzDotAtomAddress(f *testing.F) {
	for _, s := range []string{"j@example.com", "a.b+c@x-y.example", "!#$%&'*+-/=?^_`{|}~@h", "a..b@x", ".a@x", "a.@x",
		"a@x.", "a@.x", "@x", "a@", "a@b@c", "\"a b\"@x", "a@[192.0.2.1]", "é@x", "a@bü", "a b@x", "a@x\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !dotAtomAddress(s) {
			return
		}
		parsed, err := mail.ParseAddress(s)
		if err != nil || parsed.Name != "" || parsed.Address != s {
			t.Fatalf("dotAtomAddress(%q) is true, but net/mail parses it as %v, %v", s, parsed, err)
		}
	})
}

func TestDotAtomAddress(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"j@example.com": true, "a.b+c@x-y.example": true, "O'Neil@x.example": true, "j@localhost": true,
		"a..b@x": false, ".a@x": false, "a.@x": false, "a@x.": false, "a@.x": false, "@x": false, "a@": false,
		"a@b@c": false, `"a b"@x`: false, "a@[192.0.2.1]": false, "é@x": false, "a@bü": false, "a@b_c": false,
	} {
		if got := dotAtomAddress(s); got != want {
			t.Errorf("dotAtomAddress(%q) = %v, want %v", s, got, want)
		}
	}
}

// FuzzRedact puts a sentinel secret, followed by anything, where secrets go
// in every URL form mailspool takes (and the forms people type by mistake),
// and checks that neither Redact nor the errors of Mux.OpenTransport ever
// show it.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{"", "/PW", "#x", "?x", "@x", "%", "%zz", ":x", "/x@y", "&password=z", "\x00", "@h/p?q#f"} {
		f.Add(s, "127.0.0.1:3306", "app")
	}
	mux := &Mux{}
	mux.Register("smtp", opener{})
	f.Fuzz(func(t *testing.T, tail, host, path string) {
		secret := sentinel + tail
		for _, form := range []string{
			"mysql://root:%[1]s@%[2]s/%[3]s",
			"smtp://user:%[1]s@%[2]s/%[3]s",
			"smtps://:%[1]s@%[2]s",
			"sendgrid://apikey:%[1]s@default?%[3]s",
			"root:%[1]s@tcp(%[2]s)/%[3]s",
			"root:%[1]s@%[2]s",
			"smtp://%[2]s?password=%[1]s",
			"smtp://%[2]s?%[3]s&token=%[1]s",
			"ses://AKIA:%[1]s@default?region=%[3]s",
			"sendgrid://apikey:k@eu?endpoint=https://proxyuser:%[1]s@%[2]s/%[3]s",
			"ses://AKIA:k@default?endpoint=https://%[1]s@%[2]s&region=%[3]s",
			"smtp://u:p@%[2]s?ca_file=root:%[1]s@tcp(%[2]s)/%[3]s",
		} {
			for _, sec := range []string{secret, url.PathEscape(secret), url.QueryEscape(secret)} {
				raw := fmt.Sprintf(form, sec, host, path)
				if strings.Count(raw, sentinel) != 1 {
					continue // the host or path repeats the sentinel: not a secret
				}
				if got := Redact(raw); strings.Contains(got, sentinel) {
					t.Fatalf("Redact(%q) = %q shows the secret", raw, got)
				}
				if _, err := mux.OpenTransport(context.Background(), raw); err != nil && strings.Contains(err.Error(), sentinel) {
					t.Fatalf("OpenTransport(%q) error %q shows the secret", raw, err)
				}
			}
		}
	})
}

const sentinel = "S3NT1NEL"

func TestNewMessageID(t *testing.T) {
	t.Parallel()
	a, b := NewMessageID("x@shop.example"), NewMessageID("x@shop.example")
	if a == b || !strings.HasSuffix(a, "@shop.example") {
		t.Errorf("%q %q", a, b)
	}
	if m := (&Message{MessageID: a}); messageIDProblem(m.MessageID) != "" {
		t.Errorf("generated id %q does not validate", a)
	}
	if !strings.HasSuffix(NewMessageID(""), "@mailspool.invalid") {
		t.Error("fallback domain")
	}
}

type opener struct{}

func (opener) OpenTransportURL(_ context.Context, _ *url.URL) (Transport, error) { return nil, nil }

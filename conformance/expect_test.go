package conformance

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mailspool/mailspool/classify"
	"github.com/mailspool/mailspool/transport"
)

func TestExpectedCoversEveryFailingScenario(t *testing.T) {
	t.Parallel()
	for _, sc := range Scenarios {
		if _, ok := expected[sc]; ok == (sc == Accept) {
			t.Errorf("expected[%s] present = %v", sc, ok)
		}
	}
	want := outcome{kinds: []transport.Kind{transport.Permanent}, scopes: []transport.Scope{transport.ScopeRecipient}, code: 550, enhanced: "5.1.1", detail: true}
	if got := expected[SMTP550]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("expected[smtp-550] = %+v, want %+v", got, want)
	}
	if got := expected[SMTP452].kinds; len(got) != 1 || got[0] != transport.Temporary {
		t.Errorf("expected[smtp-452].kinds = %v, want temporary", got)
	}
	// The mailbox-full rule is classify's: the suite expects what its
	// table decides for the scenario's reply.
	if got, want := expected[SMTP552].kinds, transport.KindOf(classify.SMTPReply(SMTP552.Reply())); len(got) != 1 || got[0] != want || want != transport.Permanent {
		t.Errorf("expected[smtp-552].kinds = %v, want classify's %s (Permanent)", got, want)
	}
}

func TestCheckOutcome(t *testing.T) {
	t.Parallel()
	smtp550 := expected[SMTP550]
	tests := []struct {
		name string
		err  error
		want outcome
		diff []string // substrings, one per expected difference
	}{
		{"match", &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeRecipient, Code: 550, Enhanced: "5.1.1", Detail: "no such user"}, smtp550, nil},
		{"match wrapped", fmt.Errorf("smtp: rcpt: %w", &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeRecipient, Code: 550, Enhanced: "5.1.1", Detail: "x"}), smtp550, nil},
		{"permanent without evidence", &transport.Error{Kind: transport.Permanent, Code: 550, Enhanced: "5.1.1", Detail: "x"}, smtp550, []string{"Scope = transient, want recipient", "Permanent with scope transient"}},
		{"refused without scope", &transport.Error{Kind: transport.Connection}, expected[Refused], []string{"Scope = transient, want lane"}},
		{"nil", nil, smtp550, []string{"KindOf = sent"}},
		{"unclassified", errors.New("boom"), smtp550, []string{"KindOf = temporary", "no *transport.Error"}},
		{"wrong kind and code", &transport.Error{Kind: transport.Temporary, Scope: transport.ScopeRecipient, Code: 450, Enhanced: "5.1.1", Detail: "x"}, smtp550, []string{"KindOf = temporary, want permanent", "Code = 450, want 550"}},
		{"no enhanced, no detail", &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeRecipient, Code: 550}, smtp550, []string{`Enhanced = "", want "5.1.1"`, "Detail is empty"}},
		{"maybe delivered on a reply", &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeRecipient, Code: 550, Enhanced: "5.1.1", Detail: "x", MaybeDelivered: true}, smtp550, []string{"MaybeDelivered = true, want false"}},
		{"stall without maybe", &transport.Error{Kind: transport.Temporary}, expected[StallAfterData], []string{"MaybeDelivered = false, want true"}},
		{"hang as connection", &transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane}, expected[Hang], nil},
		{"hang as permanent", &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeLane}, expected[Hang], []string{"want connection or temporary", "Permanent with scope lane"}},
		{"429 without hint", &transport.Error{Kind: transport.Temporary, Code: 429}, expected[HTTP429], []string{"RetryAfter = 0s, want 7s"}},
		{"429 with hint", &transport.Error{Kind: transport.Temporary, Code: 429, RetryAfter: 7 * time.Second}, expected[HTTP429], nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkOutcome(tt.err, tt.want)
			if len(got) != len(tt.diff) {
				t.Fatalf("checkOutcome = %q, want %d differences like %q", got, len(tt.diff), tt.diff)
			}
			for i, d := range tt.diff {
				if !strings.Contains(got[i], d) {
					t.Errorf("difference %d = %q, want it to contain %q", i, got[i], d)
				}
			}
		})
	}
}

func TestLeaks(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t/pa ss"
	hidden := &transport.Error{Kind: transport.Connection, Detail: "auth failed for " + url.QueryEscape(secret)}
	tests := []struct {
		name string
		err  error
		want []string
	}{
		{"clean", &transport.Error{Kind: transport.Connection, Detail: "535 5.7.8 authentication failed"}, nil},
		{"in text", fmt.Errorf("dial smtp://u:%s@host: refused", secret), []string{"err.Error()"}},
		{"escaped in detail", hidden, []string{"Detail of *transport.Error #1", "err.Error()"}},
		{"detail hidden by a wrapper", opaque{hidden}, []string{"Detail of *transport.Error #1"}},
		{"in a joined error", errors.Join(errors.New("first"), fmt.Errorf("key %s", url.PathEscape(secret))), []string{"err.Error()"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := leaks(tt.err, secret)
			if len(got) != len(tt.want) {
				t.Fatalf("leaks = %q, want %q", got, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(strings.Join(got, "\n"), w+" contains the secret") {
					t.Errorf("leaks = %q, want one for %q", got, w)
				}
			}
		})
	}
	if got := leaks(errors.New("anything"), ""); got != nil {
		t.Errorf("leaks with no secret = %q, want nil", got)
	}
}

// opaque hides its cause's text but keeps it in the chain.
type opaque struct{ err error }

func (o opaque) Error() string { return "send failed" }
func (o opaque) Unwrap() error { return o.err }

func TestCompareReceived(t *testing.T) {
	t.Parallel()
	m := intactMessage()
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if d := compareReceived(m, ReceivedFromMessage(m)); d != nil {
		t.Fatalf("ReceivedFromMessage does not compare equal: %q", d)
	}
	trailing := ReceivedFromMessage(m)
	trailing.Text += "\n\n"
	trailing.HTML = strings.TrimRight(trailing.HTML, "\n")
	if d := compareReceived(m, trailing); d != nil {
		t.Errorf("trailing newlines made a difference: %q", d)
	}
	for name, c := range map[string]struct {
		change func(r *Received)
		want   string
	}{
		"subject":        {func(r *Received) { r.Subject = "Gr=C3=BC=C3=9Fe" }, "Subject"},
		"from name":      {func(r *Received) { r.FromName = "Muller, Jorg" }, "FromName"},
		"two recipients": {func(r *Received) { r.To = append(r.To, "bcc@example.com") }, "exactly"},
		"dot line":       {func(r *Received) { r.Text = strings.Replace(r.Text, "\n.\n", "\n..\n", 1) }, "Text"},
		"from line":      {func(r *Received) { r.HTML = strings.Replace(r.HTML, "\nFrom ", "\n>From ", 1) }, "HTML"},
		"message id":     {func(r *Received) { r.Header.Set("Message-Id", "<other@example.com>") }, "Message-Id"},
		"reply-to":       {func(r *Received) { r.Header.Set("Reply-To", "support@example.com") }, "Reply-To name"},
		"bad reply-to":   {func(r *Received) { r.Header.Set("Reply-To", "not an address") }, "does not parse"},
		"missing header": {func(r *Received) { r.Header.Del("List-Unsubscribe-Post") }, "List-Unsubscribe-Post"},
		"folded header": {func(r *Received) {
			r.Header.Set("List-Unsubscribe", "<https://example.com/u/abc123>,<mailto:unsub@example.com>")
		}, "List-Unsubscribe header"},
		"no html at all":  {func(r *Received) { r.HTML = "" }, "HTML"},
		"empty recipient": {func(r *Received) { r.To = nil }, "got 0 recipients"},
	} {
		t.Run(name, func(t *testing.T) {
			r := ReceivedFromMessage(m)
			c.change(&r)
			d := compareReceived(m, r)
			if len(d) != 1 || !strings.Contains(d[0], c.want) {
				t.Errorf("compareReceived = %q, want one difference about %q", d, c.want)
			}
		})
	}
}

package classify

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/transport"
)

func TestNewRulesRejectsInvalidRulesByName(t *testing.T) {
	for _, tc := range []struct {
		rule Rule
		want string
	}{
		{Rule{Name: "", Code: 550, Kind: transport.Permanent}, "rule #1: name"},
		{Rule{Name: "bad name", Code: 550, Kind: transport.Permanent}, `rule bad name: name "bad name"`},
		{Rule{Name: "nothing", Kind: transport.Permanent}, "rule nothing: no condition"},
		{Rule{Name: "sent", Code: 550, Kind: transport.Sent}, "rule sent: kind sent"},
		{Rule{Name: "code", Code: 250, Kind: transport.Permanent}, "rule code: code 250"},
		{Rule{Name: "enh", Enhanced: "5.7", Kind: transport.Permanent}, `rule enh: enhanced "5.7"`},
		{Rule{Name: "re", Text: "(unclosed", Kind: transport.Permanent}, `rule re: text "(unclosed"`},
		{Rule{Name: "err", Error: "Bad Name", Kind: transport.Permanent}, `rule err: error "Bad Name"`},
		{Rule{Name: "wait", Code: 421, Kind: transport.Temporary, RetryAfter: -time.Second}, "rule wait: retry after -1s"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			_, err := NewRules([]Rule{tc.rule})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "classify: "+tc.want)
		})
	}
	_, err := NewRules([]Rule{{Name: "a", Code: 550, Kind: transport.Permanent}, {Name: "a", Code: 551, Kind: transport.Permanent}})
	require.ErrorContains(t, err, "rule a: the name is used twice")
}

func TestRulesApply(t *testing.T) {
	rules, err := NewRules([]Rule{
		{Name: "acme-full", Code: 552, Enhanced: "5.2.2", Text: `temporarily`, Kind: transport.Temporary, RetryAfter: time.Hour},
		{Name: "disabled-any-class", Enhanced: "X.7.13", Kind: transport.Permanent},
		{Name: "ses-param", Error: "InvalidParameterValue", Kind: transport.Connection},
		{Name: "hang", Text: `i/o timeout`, Kind: transport.Temporary},
	})
	require.NoError(t, err)
	require.Equal(t, 4, rules.Len())

	// The first matching rule decides; the facts of the reply are kept.
	d := Explain(rules.Apply(SMTPReply("552 5.2.2 Mailbox temporarily full")))
	assert.Equal(t, Decision{Kind: transport.Temporary, Code: 552, Enhanced: "5.2.2", RetryAfter: time.Hour,
		Scope: transport.ScopeRecipient, Rule: "operator:acme-full", Detail: "Mailbox temporarily full"}, d)
	// Every condition must hold: a 552 without the text falls to the table.
	assert.Equal(t, "smtp-mailbox-full", Explain(rules.Apply(SMTPReply("552 5.2.2 Mailbox full"))).Rule)
	// "X" as the class matches 4 and 5.
	assert.Equal(t, "operator:disabled-any-class", Explain(rules.Apply(SMTPReply("525 5.7.13 User account disabled"))).Rule)
	assert.Equal(t, transport.Permanent, Explain(rules.Apply(SMTPReply("454 4.7.13 User account disabled"))).Kind)
	// A provider's error name is the start of the Detail.
	ses := &transport.Error{Kind: transport.Permanent, Code: 400, Detail: "InvalidParameterValue: Missing final '@domain' (request r1)"}
	assert.Equal(t, "operator:ses-param", Explain(rules.Apply(fmt.Errorf("ses: %w", ses))).Rule)
	notSES := &transport.Error{Kind: transport.Permanent, Code: 400, Detail: "InvalidParameterValueX: no"}
	assert.Same(t, notSES, rules.Apply(notSES))
	// A failure without a reply is matched on its text; the cause is kept.
	cause := errors.New("dial tcp 192.0.2.1:25: i/o timeout")
	got := rules.Apply(Error(cause))
	assert.Equal(t, transport.Temporary, transport.KindOf(got))
	assert.ErrorIs(t, got, cause)
	// nil stays nil; no rules change nothing.
	require.NoError(t, rules.Apply(nil))
	var none *Rules
	reply := SMTPReply("550 5.1.1 no such user")
	assert.Same(t, reply, none.Apply(reply))
}

func TestRulesTransport(t *testing.T) {
	rules, err := NewRules([]Rule{{Name: "mine", Code: 550, Kind: transport.Connection}})
	require.NoError(t, err)
	inner := &replyTransport{err: SMTPReply("550 5.7.1 Our own policy")}
	tr := rules.Transport(inner)
	_, err = tr.Send(context.Background(), &transport.Message{})
	d := Explain(err)
	assert.Equal(t, transport.Connection, d.Kind)
	assert.Equal(t, "operator:mine", d.Rule)
	require.NoError(t, tr.Close())
	assert.True(t, inner.closed)
	var empty *Rules
	assert.Same(t, transport.Transport(inner), empty.Transport(inner), "no rules: the transport itself")
}

// replyTransport fails every Send with err.
type replyTransport struct {
	err    error
	closed bool
}

func (r *replyTransport) Send(context.Context, *transport.Message) (transport.Receipt, error) {
	return transport.Receipt{}, r.err
}

func (r *replyTransport) Close() error { r.closed = true; return nil }

func TestExplain(t *testing.T) {
	assert.Equal(t, Decision{Kind: transport.Sent, Rule: "sent"}, Explain(nil))
	assert.Equal(t, Decision{Kind: transport.Temporary, Rule: "none", Detail: "boom"}, Explain(errors.New("boom")))
	d := Explain(MaybeDelivered(errors.New("read tcp: i/o timeout")))
	assert.True(t, d.MaybeDelivered)
	assert.Equal(t, "maybe-delivered", d.Rule)
	// Every built-in SMTP rule has a name and is reachable by name.
	names := map[string]bool{}
	for _, r := range smtpRules {
		require.NotEmpty(t, r.name)
		require.False(t, names[r.name], "rule %s listed twice", r.name)
		names[r.name] = true
	}
}

func TestAmbiguousReplyIsAboutTheRecipient(t *testing.T) {
	te := asError(SMTPReply("554 5.7.1 <bob@example.org>: Recipient address rejected: Authentication required"))
	require.NotNil(t, te)
	assert.Equal(t, "smtp-ambiguous", te.Rule)
	assert.Equal(t, transport.ScopeRecipient, te.Scope)
	// Exchange's relay refusal mentions a recipient but does not reject one.
	te = asError(SMTPReply("550 5.7.54 SMTP; Unable to relay recipient in non-accepted domain"))
	assert.Equal(t, "smtp-relay", te.Rule)
	assert.Equal(t, transport.ScopeLane, te.Scope)
}

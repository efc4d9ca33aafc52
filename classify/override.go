package classify

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/mailspool/mailspool/transport"
)

// Rule is an operator's classification rule: when a failure matches every
// condition the rule sets, the rule decides its Kind (and, if set, its
// RetryAfter) instead of the built-in table. At least one condition must be
// set.
type Rule struct {
	// Name identifies the rule in errors, in [Explain] and in the stored
	// outcome ("operator:NAME"): 1-64 of a-z, A-Z, 0-9, '.', '_' and '-'.
	Name string
	// Code is the SMTP basic reply code or the HTTP status to match; 0
	// matches any.
	Code int
	// Enhanced is the RFC 3463 enhanced code to match, e.g. "5.7.1"; "X" as
	// the class matches both 4 and 5 ("X.7.13"). Empty matches any.
	Enhanced string
	// Text is a regular expression (RE2, case-insensitive) searched for in
	// the reply text or the provider's error message (the Detail, at most
	// 200 bytes) and in the error's whole text (which has the cause of a
	// failure without a reply, such as "dial tcp ...: i/o timeout"). Empty
	// matches any.
	Text string
	// Error is a provider's error name, such as SES's
	// "InvalidParameterValue": it matches a Detail that starts with it
	// followed by ":" or the end. Empty matches any.
	Error string
	// Kind is the outcome the rule gives: Temporary, Permanent or
	// Connection.
	Kind transport.Kind
	// Scope, when set, is what the rule says the failure is about; nil
	// keeps the scope the reply was given. A Permanent rule's scope must be
	// recipient or message: set to another, it is refused; left nil on a
	// failure of another scope, it makes it message (the operator's word
	// is the evidence, and it never suppresses an address).
	Scope *transport.Scope
	// RetryAfter, when positive, replaces the failure's retry hint.
	RetryAfter time.Duration
}

// Rules is a validated, ordered list of operator rules. The zero value and
// nil have no rules.
type Rules struct {
	list []compiledRule
}

type compiledRule struct {
	Rule
	text *regexp.Regexp
	enh  enhanced // class 0 when written "X.s.d"
}

var ruleName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// OperatorPrefix starts the Rule of an error decided by an operator's rule.
const OperatorPrefix = "operator:"

// NewRules validates rules and returns them ready to apply, first match
// wins. An invalid rule is an error naming it and saying what is wrong.
func NewRules(rules []Rule) (*Rules, error) {
	rs := &Rules{}
	seen := map[string]bool{}
	for i, r := range rules {
		c, err := compileRule(r)
		if err != nil {
			name := r.Name
			if name == "" {
				name = fmt.Sprintf("#%d", i+1)
			}
			return nil, fmt.Errorf("classify: rule %s: %w", name, err)
		}
		if seen[r.Name] {
			return nil, fmt.Errorf("classify: rule %s: the name is used twice", r.Name)
		}
		seen[r.Name] = true
		rs.list = append(rs.list, c)
	}
	return rs, nil
}

func compileRule(r Rule) (compiledRule, error) {
	c := compiledRule{Rule: r}
	if !ruleName.MatchString(r.Name) {
		return c, fmt.Errorf("name %q: want 1-64 of letters, digits, '.', '_' and '-'", r.Name)
	}
	switch r.Kind {
	case transport.Temporary, transport.Permanent, transport.Connection:
	default:
		return c, fmt.Errorf("kind %s: want temporary, permanent or connection", r.Kind)
	}
	if r.Scope != nil {
		switch *r.Scope {
		case transport.ScopeRecipient, transport.ScopeMessage:
		case transport.ScopeSender, transport.ScopeTransient, transport.ScopeLane:
			if r.Kind == transport.Permanent {
				return c, fmt.Errorf("scope %s: a permanent rule needs recipient or message scope (the mail is dropped only on evidence about it)", *r.Scope)
			}
		default:
			return c, fmt.Errorf("scope %s: want recipient, message, sender, transient or lane", *r.Scope)
		}
	}
	if r.Code == 0 && r.Enhanced == "" && r.Text == "" && r.Error == "" {
		return c, errors.New("no condition: set code, enhanced, text or error")
	}
	if r.Code != 0 && (r.Code < 400 || r.Code > 599) {
		return c, fmt.Errorf("code %d: want a failing SMTP code or HTTP status, 400-599", r.Code)
	}
	if r.Enhanced != "" {
		s := r.Enhanced
		wild := strings.HasPrefix(s, "X.") || strings.HasPrefix(s, "x.")
		if wild {
			s = "5" + s[1:]
		}
		e, ok := parseEnhanced(s)
		if !ok {
			return c, fmt.Errorf("enhanced %q: want class.subject.detail such as 5.7.1 or X.7.13", r.Enhanced)
		}
		if wild {
			e.class = 0
		}
		c.enh = e
	}
	if r.Text != "" {
		re, err := regexp.Compile("(?i)" + r.Text)
		if err != nil {
			return c, fmt.Errorf("text %q: %w", r.Text, err)
		}
		c.text = re
	}
	if strings.ContainsAny(r.Error, " :") {
		return c, fmt.Errorf("error %q: want a provider's error name such as InvalidParameterValue", r.Error)
	}
	if r.RetryAfter < 0 || r.RetryAfter > MaxRetryAfter {
		return c, fmt.Errorf("retry after %v: want 0 to %v", r.RetryAfter, MaxRetryAfter)
	}
	return c, nil
}

// matches reports whether the failure te (whose error text is text)
// meets every condition of c.
func (c *compiledRule) matches(te *transport.Error, text string) bool {
	if c.Code != 0 && te.Code != c.Code {
		return false
	}
	if c.Enhanced != "" {
		e, ok := parseEnhanced(te.Enhanced)
		if !ok || e.subject != c.enh.subject || e.detail != c.enh.detail || (c.enh.class != 0 && e.class != c.enh.class) {
			return false
		}
	}
	if c.Error != "" {
		name, _, _ := strings.Cut(te.Detail, ":")
		if name != c.Error {
			return false
		}
	}
	return c.text == nil || c.text.MatchString(te.Detail) || c.text.MatchString(text)
}

// Apply returns err reclassified by the first rule it matches: a copy of
// its *transport.Error with the rule's Kind, Scope (if the rule sets one;
// see [Rule.Scope]), RetryAfter (if the rule sets one) and Rule
// "operator:NAME"; Code, Enhanced, Detail, MaybeDelivered and the cause
// are kept. An error without a *transport.Error is
// matched as a Temporary failure with no code. err is returned as it is
// when it is nil or no rule matches.
func (rs *Rules) Apply(err error) error {
	if err == nil || rs == nil || len(rs.list) == 0 {
		return err
	}
	var te *transport.Error
	if !errors.As(err, &te) {
		te = &transport.Error{Kind: transport.Temporary, Err: err}
	}
	text := err.Error()
	for i := range rs.list {
		c := &rs.list[i]
		if !c.matches(te, text) {
			continue
		}
		out := *te
		out.Kind, out.Rule = c.Kind, OperatorPrefix+c.Name
		switch {
		case c.Scope != nil:
			out.Scope = *c.Scope
		case out.Kind == transport.Permanent && out.Scope != transport.ScopeRecipient && out.Scope != transport.ScopeMessage:
			out.Scope = transport.ScopeMessage
		}
		if c.RetryAfter > 0 {
			out.RetryAfter = c.RetryAfter
		}
		return &out
	}
	return err
}

// Len returns the number of rules.
func (rs *Rules) Len() int {
	if rs == nil {
		return 0
	}
	return len(rs.list)
}

// Transport returns t with every failure of its Send passed through
// [Rules.Apply]: the operator's rules come before the adapter's own
// classification. With no rules it returns t itself.
func (rs *Rules) Transport(t transport.Transport) transport.Transport {
	if rs.Len() == 0 {
		return t
	}
	return &ruledTransport{next: t, rules: rs}
}

// ruledTransport applies operator rules to the failures of next.
type ruledTransport struct {
	next  transport.Transport
	rules *Rules
}

func (t *ruledTransport) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	r, err := t.next.Send(ctx, m)
	return r, t.rules.Apply(err)
}

func (t *ruledTransport) Close() error { return t.next.Close() }

var _ transport.Transport = (*ruledTransport)(nil)

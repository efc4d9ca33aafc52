package classify

import (
	"errors"
	"time"

	"github.com/mailspool/mailspool/transport"
)

// Decision is a classified outcome with the rule that decided it: the
// answer to "why was this mail failed (or retried)?".
type Decision struct {
	Kind           transport.Kind
	Code           int    // SMTP basic code or HTTP status; 0 without a reply
	Enhanced       string // RFC 3463 enhanced code, if any
	RetryAfter     time.Duration
	MaybeDelivered bool
	// Scope is what the failure is about (recipient, message, sender,
	// transient, lane): only lane scope feeds the breaker, only recipient
	// scope may suppress an address, sender scope raises the lane's alert.
	// Sent has scope transient, as nil has (transport.ScopeOf).
	Scope transport.Scope
	// Rule names the rule that decided Kind: a built-in rule (listed in
	// the package documentation), an adapter's rule ("ses-..."), or an
	// operator's ("operator:NAME"). "none" for an error no rule classified.
	Rule   string
	Detail string
}

// Explain returns the decision carried by err, the result of this
// package's functions, an adapter's Send or [Rules.Apply]. nil is the
// decision Sent with rule "sent"; an error without a *transport.Error is
// Temporary with rule "none" (see [transport.KindOf]).
func Explain(err error) Decision {
	if err == nil {
		return Decision{Kind: transport.Sent, Rule: "sent"}
	}
	var te *transport.Error
	if !errors.As(err, &te) {
		return Decision{Kind: transport.Temporary, Rule: "none", Detail: cleanDetail(err.Error())}
	}
	d := Decision{
		Kind: te.Kind, Code: te.Code, Enhanced: te.Enhanced, RetryAfter: te.RetryAfter,
		MaybeDelivered: te.MaybeDelivered, Scope: te.Scope, Rule: te.Rule, Detail: te.Detail,
	}
	if d.Rule == "" {
		d.Rule = "none"
	}
	return d
}

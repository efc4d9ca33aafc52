package conformance

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mailspool/mailspool/classify"
	"github.com/mailspool/mailspool/transport"
)

// outcome is what one Send in a scenario must return.
type outcome struct {
	kinds []transport.Kind // the acceptable kinds
	// scopes are the acceptable scopes (nil: any). Whatever they are, a
	// Permanent outcome must be about the recipient or the message.
	scopes []transport.Scope
	// The fields below are checked on the *transport.Error in the chain
	// when set; MaybeDelivered is always checked.
	code           int
	enhanced       string
	retryAfter     time.Duration
	maybeDelivered bool
	detail         bool // Detail must not be empty
	// deadline is the context deadline the Send gets (0: the case's).
	deadline time.Duration
}

// expected is the outcome of one Send for every scenario but Accept.
var expected = map[Scenario]outcome{
	Hang:           {kinds: []transport.Kind{transport.Connection, transport.Temporary}, scopes: []transport.Scope{transport.ScopeLane, transport.ScopeTransient}, deadline: hangDeadline},
	Refused:        {kinds: []transport.Kind{transport.Connection}, scopes: []transport.Scope{transport.ScopeLane}},
	TLSFailure:     {kinds: []transport.Kind{transport.Connection}, scopes: []transport.Scope{transport.ScopeLane}},
	StallAfterData: {kinds: []transport.Kind{transport.Temporary}, scopes: []transport.Scope{transport.ScopeTransient}, maybeDelivered: true, deadline: stallDeadline},
	HTTP429:        {kinds: []transport.Kind{transport.Temporary}, scopes: []transport.Scope{transport.ScopeTransient}, code: 429, retryAfter: RetryAfter429},
	HTTP401:        {kinds: []transport.Kind{transport.Connection}, scopes: []transport.Scope{transport.ScopeLane}, code: 401},
	HTTP500:        {kinds: []transport.Kind{transport.Temporary}, scopes: []transport.Scope{transport.ScopeTransient}, code: 500},
}

func init() {
	for sc := range replies {
		expected[sc] = replyOutcome(sc.Reply())
	}
}

// replyOutcome is the outcome of an SMTP reply "ddd x.y.z text": its code
// and enhanced code, with a Detail, and the kind and scope package
// classify's decision table gives it. The suite holds no table of its own:
// the mailbox-full rule (552 5.2.2) and every other is decided in classify.
func replyOutcome(reply string) outcome {
	fields := strings.Fields(reply)
	code, _ := strconv.Atoi(fields[0])
	err := classify.SMTPReply(reply)
	return outcome{kinds: []transport.Kind{transport.KindOf(err)}, scopes: []transport.Scope{transport.ScopeOf(err)}, code: code, enhanced: fields[1], detail: true}
}

// checkOutcome lists every way err differs from want; nil means it matches.
func checkOutcome(err error, want outcome) []string {
	var diffs []string
	if k := transport.KindOf(err); !slices.Contains(want.kinds, k) {
		diffs = append(diffs, fmt.Sprintf("KindOf = %s, want %s (error: %v)", k, kindList(want.kinds), err))
	}
	if err == nil {
		return diffs
	}
	var te *transport.Error
	if !errors.As(err, &te) {
		if want.code != 0 || want.enhanced != "" || want.retryAfter != 0 || want.maybeDelivered || want.detail {
			diffs = append(diffs, fmt.Sprintf("no *transport.Error in the chain of %q to carry the code, enhanced code, retry hint or maybe-delivered flag", err))
		}
		return diffs
	}
	if want.scopes != nil && !slices.Contains(want.scopes, te.Scope) {
		diffs = append(diffs, fmt.Sprintf("Scope = %s, want %s", te.Scope, scopeList(want.scopes)))
	}
	if te.Kind == transport.Permanent && te.Scope != transport.ScopeRecipient && te.Scope != transport.ScopeMessage {
		diffs = append(diffs, fmt.Sprintf("Permanent with scope %s: a mail is dropped only on evidence about its recipient or its message", te.Scope))
	}
	if want.code != 0 && te.Code != want.code {
		diffs = append(diffs, fmt.Sprintf("Code = %d, want %d", te.Code, want.code))
	}
	if want.enhanced != "" && te.Enhanced != want.enhanced {
		diffs = append(diffs, fmt.Sprintf("Enhanced = %q, want %q", te.Enhanced, want.enhanced))
	}
	if want.retryAfter != 0 && te.RetryAfter != want.retryAfter {
		diffs = append(diffs, fmt.Sprintf("RetryAfter = %v, want %v", te.RetryAfter, want.retryAfter))
	}
	if te.MaybeDelivered != want.maybeDelivered {
		diffs = append(diffs, fmt.Sprintf("MaybeDelivered = %v, want %v", te.MaybeDelivered, want.maybeDelivered))
	}
	if want.detail && te.Detail == "" {
		diffs = append(diffs, "Detail is empty, want the server's reply text")
	}
	return diffs
}

func scopeList(ss []transport.Scope) string {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.String()
	}
	return strings.Join(names, " or ")
}

func kindList(ks []transport.Kind) string {
	names := make([]string, len(ks))
	for i, k := range ks {
		names[i] = k.String()
	}
	return strings.Join(names, " or ")
}

// leaks lists where err's text shows secret, also URL-escaped; nil when it
// does not. The Details of every *transport.Error in the chain are checked
// even when Error() leaves them out.
func leaks(err error, secret string) []string {
	if err == nil || secret == "" {
		return nil
	}
	forms := secretForms(secret)
	texts := map[string]string{"err.Error()": err.Error()}
	n := 0
	walkChain(err, func(e error) {
		if te, ok := e.(*transport.Error); ok {
			n++
			texts[fmt.Sprintf("Detail of *transport.Error #%d", n)] = te.Detail
		}
	})
	var found []string
	for where, text := range texts {
		for _, f := range forms {
			if strings.Contains(text, f) {
				found = append(found, where+" contains the secret")
				break
			}
		}
	}
	slices.Sort(found)
	return found
}

// secretForms returns secret as it is and URL-escaped, the forms in which
// it can leak into an error text.
func secretForms(secret string) []string {
	forms := []string{secret}
	for _, f := range []string{url.QueryEscape(secret), url.PathEscape(secret)} {
		if !slices.Contains(forms, f) {
			forms = append(forms, f)
		}
	}
	return forms
}

// walkChain calls f for err and every error it wraps, depth first,
// following both Unwrap() error and Unwrap() []error.
func walkChain(err error, f func(error)) {
	if err == nil {
		return
	}
	f(err)
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		walkChain(u.Unwrap(), f)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			walkChain(e, f)
		}
	}
}

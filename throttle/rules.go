package throttle

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/mailspool/mailspool/transport"
)

// Rule is a slow-down rule: a reply it matches lowers the rate of the
// recipient's domain group, or of the lane's own and provider limits, to
// Factor of the configured rate for Hold, and lets it climb back over
// Recover.
type Rule struct {
	Name string
	// What it matches; every field given must match. Code is the SMTP
	// reply code or HTTP status, Enhanced the RFC 3463 code ("4.7.28"),
	// Text a regular expression on the error's text (case-insensitive).
	Code     int
	Enhanced string
	Text     string
	// Target is "domain" (the recipient's group) or "provider" (the
	// lane's limits).
	Target  string
	Factor  float64
	Hold    time.Duration
	Recover time.Duration
	// Pause: when the reply gives a Retry-After, no send of the target
	// starts before it has passed.
	Pause bool

	re *regexp.Regexp
}

// The default hold and recovery of the built-in rules.
const (
	DefaultHold    = 10 * time.Minute
	DefaultRecover = 10 * time.Minute
)

// DefaultRules are the built-in slow-down rules (docs/THROTTLING.md says
// where each comes from).
var DefaultRules = []Rule{
	{Name: "gmail-4.7.28", Enhanced: "4.7.28", Target: "domain", Factor: 0.5, Hold: DefaultHold, Recover: DefaultRecover},
	{Name: "yahoo-tss04", Text: `\[TSS04\]`, Target: "domain", Factor: 0.5, Hold: DefaultHold, Recover: DefaultRecover},
	{Name: "microsoft-throttled", Text: `4\.7\.65[0-2]|\bRP-00[1-3]\b|has been temporarily rate limited due to IP reputation`, Target: "domain", Factor: 0.5, Hold: DefaultHold, Recover: DefaultRecover},
	{Name: "ses-throttling", Text: `\b(Throttling|ThrottlingException|TooManyRequests(Exception)?)\b|Maximum sending rate exceeded`, Target: "provider", Factor: 0.5, Hold: time.Minute, Recover: 5 * time.Minute, Pause: true},
	{Name: "http-429", Code: 429, Target: "provider", Factor: 0.5, Hold: time.Minute, Recover: 5 * time.Minute, Pause: true},
}

// Check says what is wrong with r, if anything, and compiles its Text.
func (r *Rule) Check() error {
	name := r.Name
	switch {
	case name == "":
		return errors.New("slow-down rule without a name")
	case r.Code == 0 && r.Enhanced == "" && r.Text == "":
		return fmt.Errorf("slow-down rule %s matches nothing: give code, enhanced or text", name)
	case r.Code < 0 || r.Code > 999:
		return fmt.Errorf("slow-down rule %s: code %d out of range", name, r.Code)
	case r.Target != "domain" && r.Target != "provider":
		return fmt.Errorf("slow-down rule %s: target %q: want \"domain\" or \"provider\"", name, r.Target)
	case !(r.Factor > 0 && r.Factor < 1):
		return fmt.Errorf("slow-down rule %s: factor %v must be above 0 and below 1", name, r.Factor)
	case r.Hold <= 0 || r.Recover < 0:
		return fmt.Errorf("slow-down rule %s: hold %v must be positive and recover %v not negative", name, r.Hold, r.Recover)
	}
	if r.Text != "" && r.re == nil {
		re, err := regexp.Compile("(?i)" + r.Text)
		if err != nil {
			return fmt.Errorf("slow-down rule %s: text: %v", name, err)
		}
		r.re = re
	}
	return nil
}

// matches reports whether err is a reply r matches.
func (r *Rule) matches(err error, te *transport.Error) bool {
	if r.Code != 0 && (te == nil || te.Code != r.Code) {
		return false
	}
	if r.Enhanced != "" && (te == nil || te.Enhanced != r.Enhanced) && !strings.Contains(err.Error(), " "+r.Enhanced+" ") {
		return false
	}
	if r.Text != "" {
		if r.re == nil {
			if r.Check() != nil {
				return false
			}
		}
		if !r.re.MatchString(err.Error()) {
			return false
		}
	}
	return true
}

// Match returns the first of rules that matches err.
func Match(rules []Rule, err error) (*Rule, bool) {
	var te *transport.Error
	errors.As(err, &te)
	for i := range rules {
		if rules[i].matches(err, te) {
			return &rules[i], true
		}
	}
	return nil, false
}

func (p *Policy) rules() []Rule {
	if p.Rules == nil {
		return DefaultRules
	}
	return p.Rules
}

// react applies the first rule that matches a send's error to the keys
// the send took.
func (p *Policy) react(ctx context.Context, limits []Limit, sendErr error) {
	r, ok := Match(p.rules(), sendErr)
	if !ok {
		return
	}
	var te *transport.Error
	errors.As(sendErr, &te)
	for _, l := range limits {
		isDomain := strings.HasPrefix(l.Key, "domain:")
		if isDomain != (r.Target == "domain") || l.Rate.Off() {
			continue
		}
		ev := SlowEvent{Lane: p.Lane, Key: l.Key, Rule: r.Name, Factor: r.Factor, Hold: r.Hold, Recover: r.Recover}
		if err := p.Store.Slow(ctx, l.Key, r.Factor, r.Hold, r.Recover, r.Name); err != nil {
			p.log().Warn("slowing a limit down failed", "lane", p.Lane, "key", l.Key, "rule", r.Name, "err", err)
			continue
		}
		if r.Pause && te != nil && te.RetryAfter > 0 {
			ev.Pause = te.RetryAfter
			if err := p.Store.Pause(ctx, l.Key, te.RetryAfter); err != nil {
				p.log().Warn("pausing a limit failed", "lane", p.Lane, "key", l.Key, "rule", r.Name, "err", err)
			}
		}
		p.log().Warn("send limit slowed down by a reply", "lane", p.Lane, "key", l.Key, "rule", r.Name, "factor", r.Factor, "hold", r.Hold, "recover", r.Recover, "pause", ev.Pause)
		if p.OnSlow != nil {
			p.OnSlow(ev)
		}
	}
}

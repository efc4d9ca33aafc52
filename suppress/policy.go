package suppress

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mailspool/mailspool/internal/duration"
	"github.com/mailspool/mailspool/transport"
)

// Forever is a Policy duration: the entry lasts until it is removed.
const Forever time.Duration = 0

// Off is a Policy duration: the reason does not suppress in this lane.
const Off time.Duration = -1

// Policy is one lane's suppression policy: what suppresses, for how long,
// and whether the lane checks the list. The zero Policy is the default:
// hard bounces, complaints and invalid addresses suppress until removed,
// in every lane; unsubscribes until removed, in the lane they came from;
// the lane checks the list at enqueue and at claim.
type Policy struct {
	// Bypass makes the lane send even to suppressed addresses: for
	// transactional mail that must go out whatever happened before (a
	// password reset to an address that bounced years ago). It is an
	// explicit choice per lane; the lane's permanent failures still feed
	// the list.
	Bypass bool
	// Hold, when positive, makes a mail whose recipient is found
	// suppressed at its claim wait instead of failing: it is checked again
	// every Hold, and sent once the address is no longer suppressed
	// (removed, or its entry expired); suppress remove --release makes it
	// due at once. Its not-after deadline still ends it. 0 (the default):
	// it fails with kind "suppressed".
	Hold time.Duration
	// How long each reason suppresses when it is learnt from the lane's
	// mail or from a provider's event about it: Forever (the default),
	// Off, or a duration.
	HardBounce, Complaint, Invalid, Unsubscribe time.Duration
}

// For returns how long reason suppresses under p, and whether it does.
func (p Policy) For(reason Reason) (time.Duration, bool) {
	var d time.Duration
	switch reason {
	case HardBounce:
		d = p.HardBounce
	case Complaint:
		d = p.Complaint
	case Invalid:
		d = p.Invalid
	case Unsubscribe:
		d = p.Unsubscribe
	default:
		return Forever, true // manual: as the operator says
	}
	return d, d != Off
}

// ScopeOf is the scope an entry learnt from lane's mail is made in:
// unsubscribes apply to the lane they came from (a newsletter unsubscribe
// never blocks a password reset), everything else to every lane.
func ScopeOf(reason Reason, lane string) string {
	if reason == Unsubscribe && lane != "" {
		return lane
	}
	return ScopeAll
}

// Entry returns the entry that learning reason about address from source
// makes under p at now, and false when p says the reason does not
// suppress.
func (p Policy) Entry(address string, reason Reason, lane, source string, now time.Time) (Entry, bool) {
	d, on := p.For(reason)
	if !on {
		return Entry{}, false
	}
	e := Entry{Address: address, Scope: ScopeOf(reason, lane), Reason: reason, Source: source, CreatedAt: now}
	if d > 0 {
		e.ExpiresAt = now.Add(d)
	}
	return e, true
}

// ParseDuration reads a policy duration as config writes it: "forever",
// "off", or a duration such as "720h" or "30d".
func ParseDuration(s string) (time.Duration, error) {
	switch strings.TrimSpace(s) {
	case "", "forever":
		return Forever, nil
	case "off":
		return Off, nil
	}
	d, err := duration.Parse(s)
	if err != nil {
		return 0, err
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q: want forever, off or a positive duration", s)
	}
	return d, nil
}

// FromFailure is what a permanent failure of a send teaches: the reason to
// suppress its recipient for, and false when it teaches nothing about the
// recipient. Only a verdict of transport.ScopeRecipient suppresses (the
// classifier's, or an operator rule's); a permanent failure about the
// sender (our reputation, our account), the message, the lane or a
// transient condition never does, whatever its code.
func FromFailure(err error) (Reason, bool) {
	if transport.KindOf(err) != transport.Permanent {
		return "", false
	}
	var te *transport.Error
	if !errors.As(err, &te) || te.Scope != transport.ScopeRecipient {
		return "", false
	}
	if te.Enhanced == "5.1.3" {
		return Invalid, true // bad destination mailbox address syntax
	}
	return HardBounce, true
}

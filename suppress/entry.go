package suppress

import (
	"errors"
	"fmt"
	"net/mail"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mailspool/mailspool/mailaddr"
)

// Reason is why an address is suppressed. Reasons are stored by name.
type Reason string

// The reasons.
const (
	HardBounce  Reason = "hard_bounce" // the address does not exist or refuses mail for good
	Complaint   Reason = "complaint"   // the recipient marked a mail as spam
	Unsubscribe Reason = "unsubscribe" // the recipient asked for no more mail (of a scope)
	Manual      Reason = "manual"      // an operator's decision
	Invalid     Reason = "invalid"     // the address cannot be mailed (bad syntax, no such domain)
)

// Reasons lists every reason, in the order help texts show them.
var Reasons = []Reason{HardBounce, Complaint, Unsubscribe, Manual, Invalid}

// ParseReason returns the reason named s.
func ParseReason(s string) (Reason, error) {
	for _, r := range Reasons {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("suppress: unknown reason %q (want one of hard_bounce, complaint, unsubscribe, manual, invalid)", s)
}

// ScopeAll is the scope of an entry that applies to every lane.
const ScopeAll = "all"

var scopeName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// CheckScope reports whether s is a valid scope: "all" or a lane name.
func CheckScope(s string) error {
	if !scopeName.MatchString(s) {
		return fmt.Errorf("suppress: invalid scope %q (all, or a lane name: lower-case letters, digits, _ and -)", s)
	}
	return nil
}

// Entry is one suppressed address.
type Entry struct {
	Address string `json:"address"` // normalized
	Scope   string `json:"scope"`   // ScopeAll or a lane name
	Reason  Reason `json:"reason"`
	// Source says where the entry came from: "mail:LANE/ID",
	// "sendgrid:EVENT_ID", "ses:MESSAGE_ID", "operator", "import:FILE".
	Source    string    `json:"source,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is when the entry stops applying; the zero time means
	// until it is removed.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// maxSource is the size of the source column.
const maxSource = 255

// check normalizes e's address and checks its fields.
func (e *Entry) check() error {
	a, err := Normalize(e.Address)
	if err != nil {
		return err
	}
	e.Address = a
	if e.Scope == "" {
		e.Scope = ScopeAll
	}
	if err := CheckScope(e.Scope); err != nil {
		return err
	}
	if _, err := ParseReason(string(e.Reason)); err != nil {
		return err
	}
	if len(e.Source) > maxSource {
		e.Source = e.Source[:maxSource]
	}
	if !e.ExpiresAt.IsZero() && !e.ExpiresAt.After(e.CreatedAt) {
		return fmt.Errorf("suppress: %s: expires %s, not after it was made", e.Address, e.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// ErrAddress matches the errors of Normalize.
var ErrAddress = errors.New("suppress: invalid address")

// Normalize returns the form under which an address is suppressed and
// looked up: mailaddr.Key, the form the per-recipient rate limits count
// under (the domain mapped per UTS #46, the local part case-folded), so
// that one mailbox is one entry however it is spelt. It accepts a bare
// address or one with a display name ("Ann <ann@example.com>").
func Normalize(addr string) (string, error) {
	a := strings.TrimSpace(addr)
	if strings.ContainsAny(a, "<>\"") {
		p, err := mail.ParseAddress(a)
		if err != nil {
			return "", fmt.Errorf("%w %q: %v", ErrAddress, addr, err)
		}
		a = p.Address
	}
	// At most 254 characters, not bytes: an address the queue accepted
	// at 254 bytes with A-label domains (xn--...) is stored in U-labels,
	// which can take more bytes, not more characters.
	if utf8.RuneCountInString(a) > 254 || strings.ContainsAny(a, " \t\r\n\x00,;") {
		return "", fmt.Errorf("%w %q", ErrAddress, addr)
	}
	k, err := mailaddr.Key(a)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrAddress, err)
	}
	return k, nil
}

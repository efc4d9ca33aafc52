package mailaddr

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// ErrInvalid matches every error of [Normalize] and [Key] (errors.Is).
var ErrInvalid = errors.New("mailaddr: invalid address")

// Error says why an address cannot be normalized.
type Error struct {
	Addr   string
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("mailaddr: %q: %s", e.Addr, e.Reason) }

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// FormatProblem describes the first format character (Unicode category
// Cf: zero-width space and joiners, soft hyphen, byte-order mark,
// bidirectional controls, ...) in s, or returns "". Such characters are
// invisible: an address holding one looks like, and may be delivered as,
// another address.
func FormatProblem(s string) string {
	for _, r := range s {
		if unicode.Is(unicode.Cf, r) {
			return fmt.Sprintf("contains the invisible format character %U", r)
		}
	}
	return ""
}

// Normalize returns addr ("local@domain", no display name) in the form it
// is stored in: the local part as written, the domain normalized per
// UTS #46 (see the package documentation) in lower-case U-labels, without
// a trailing dot. An address literal ("[192.0.2.1]") keeps its domain as
// written. The error matches [ErrInvalid] and says what is wrong: a format
// character, a code point IDNA 2008 does not allow, an invalid A-label, an
// empty or too long label.
func Normalize(addr string) (string, error) {
	if !utf8.ValidString(addr) {
		return "", &Error{Addr: addr, Reason: "is not valid UTF-8"}
	}
	if reason := FormatProblem(addr); reason != "" {
		return "", &Error{Addr: addr, Reason: reason}
	}
	at := strings.LastIndexByte(addr, '@')
	if at <= 0 || at == len(addr)-1 {
		return "", &Error{Addr: addr, Reason: "is not of the form local@domain"}
	}
	local, domain := addr[:at], addr[at+1:]
	if strings.HasPrefix(domain, "[") {
		return addr, nil
	}
	d, err := Domain(domain)
	if err != nil {
		return "", &Error{Addr: addr, Reason: err.Error()}
	}
	return local + "@" + d, nil
}

// Domain returns a domain name normalized as [Normalize] does: mapped and
// checked per UTS #46 (lookup profile), in lower-case U-labels, without a
// trailing dot.
func Domain(domain string) (string, error) {
	if reason := FormatProblem(domain); reason != "" {
		return "", fmt.Errorf("the domain %s", reason)
	}
	ascii, err := idna.Lookup.ToASCII(domain)
	if err != nil {
		return "", fmt.Errorf("the domain is not a valid internationalized domain name: %v", err)
	}
	ascii = strings.TrimSuffix(ascii, ".")
	if len(ascii) > 253 {
		return "", fmt.Errorf("the domain is %d bytes long as A-labels, at most 253 allowed", len(ascii))
	}
	for label := range strings.SplitSeq(ascii, ".") {
		switch {
		case label == "":
			return "", errors.New("the domain has an empty label")
		case len(label) > 63:
			return "", fmt.Errorf("the domain label %.20q... is %d bytes long as an A-label, at most 63 allowed", label, len(label))
		}
	}
	u, err := idna.Lookup.ToUnicode(ascii)
	if err != nil {
		return "", fmt.Errorf("the domain is not a valid internationalized domain name: %v", err)
	}
	return u, nil
}

// Key returns the form addresses are compared in: [Normalize]d, with the
// local part case-folded too. Two addresses are one mailbox for rate
// limits, lookups and suppression exactly when their keys are equal.
func Key(addr string) (string, error) {
	n, err := Normalize(addr)
	if err != nil {
		return "", err
	}
	at := strings.LastIndexByte(n, '@')
	return Fold(n[:at]) + n[at:], nil
}

// Fold returns s with every letter replaced by one representative of its
// Unicode simple case folding orbit (the lower case of the orbit's smallest
// rune): Fold(a) == Fold(b) exactly when strings.EqualFold(a, b). K, k and
// the Kelvin sign fold to k, S, s and ſ to s; ASCII is lower-cased.
func Fold(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		b.WriteRune(foldRune(r))
	}
	return b.String()
}

func foldRune(r rune) rune {
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	return unicode.ToLower(least)
}

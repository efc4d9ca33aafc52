// Package verp makes and reads mailspool's VERP return paths (variable
// envelope return paths): one envelope sender per mail,
//
//	bounces+<lane>.<id>.<mac>@<bounce domain>
//
// so that a bounce names the mail it is about in the address it is sent
// to, even when the receiver strips the original message from it. The mac
// (HMAC-SHA-256 over the lane and the id, 50 bits in lower-case base32) makes
// the addresses unguessable: the bounce listener (package bounce) accepts
// mail for valid ones only, so that nobody can feed it bounces about mail
// they did not receive.
//
// Addresses are case-insensitive (some relays lower-case the local part):
// everything in them is lower case.
package verp

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// Prefix starts the local part of every return path.
const Prefix = "bounces+"

// MinKey is the least length of a key.
const MinKey = 32

// maxLocal is RFC 5321's bound on a local part.
const maxLocal = 64

// macLen is the length of the mac in the address.
const macLen = 10

// MaxLane is the longest lane name a return path holds within RFC 5321's
// 64 characters of local part, with any id.
const MaxLane = maxLocal - len(Prefix) - 2 - 19 - macLen

var b32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

var domainName = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$`)

// Signer makes and checks the return paths of one bounce domain.
type Signer struct {
	key    []byte
	domain string
}

// New returns the signer for domain (the bounce domain, whose MX points
// at mailspool serve --smtp) with key (at least MinKey bytes; a secret).
func New(key []byte, domain string) (*Signer, error) {
	if len(key) < MinKey {
		return nil, fmt.Errorf("verp: key of %d bytes, want at least %d", len(key), MinKey)
	}
	d, err := idna.Lookup.ToASCII(strings.TrimSuffix(strings.TrimSpace(domain), "."))
	if err != nil || !domainName.MatchString(d) {
		return nil, fmt.Errorf("verp: %q is not a domain name (the bounce domain, e.g. bounces.example.com)", domain)
	}
	return &Signer{key: key, domain: d}, nil
}

// Domain is the bounce domain, as an A-label.
func (s *Signer) Domain() string { return s.domain }

func (s *Signer) mac(lane string, id int64) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("mailspool-verp-1\x00" + lane + "\x00" + strconv.FormatInt(id, 10)))
	return b32.EncodeToString(m.Sum(nil))[:macLen]
}

// ErrLane is returned by Address for a lane name no return path can hold.
var ErrLane = errors.New("verp: lane name cannot be in a return path")

var laneName = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// CheckLane reports whether lane fits in a return path.
func CheckLane(lane string) error {
	if len(lane) > MaxLane || !laneName.MatchString(lane) {
		return fmt.Errorf("%w: %q (lower-case letters, digits, _ and -, at most %d)", ErrLane, lane, MaxLane)
	}
	return nil
}

// Address returns the return path of mail id of lane.
func (s *Signer) Address(lane string, id int64) (string, error) {
	if err := CheckLane(lane); err != nil {
		return "", err
	}
	if id <= 0 {
		return "", fmt.Errorf("verp: mail id %d", id)
	}
	return Prefix + lane + "." + strconv.FormatInt(id, 10) + "." + s.mac(lane, id) + "@" + s.domain, nil
}

// Parse returns the lane and mail id a return path names, and false when
// addr is not one of this signer's (another domain, a bad mac). The mac is
// compared in constant time.
func (s *Signer) Parse(addr string) (lane string, id int64, ok bool) {
	addr = strings.ToLower(strings.TrimSpace(addr))
	local, domain, found := strings.Cut(addr, "@")
	if !found || domain != s.domain {
		return "", 0, false
	}
	rest, found := strings.CutPrefix(local, Prefix)
	if !found {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '.')
	if i < 0 {
		return "", 0, false
	}
	mac := rest[i+1:]
	rest = rest[:i]
	j := strings.LastIndexByte(rest, '.')
	if j < 0 {
		return "", 0, false
	}
	lane, digits := rest[:j], rest[j+1:]
	id, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || id <= 0 || CheckLane(lane) != nil || strconv.FormatInt(id, 10) != digits {
		return "", 0, false
	}
	if subtle.ConstantTimeCompare([]byte(s.mac(lane, id)), []byte(mac)) != 1 {
		return "", 0, false
	}
	return lane, id, true
}

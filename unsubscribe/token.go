package unsubscribe

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Key is one signing key.
type Key struct {
	// ID names the key in every token it signs: 1 to 16 lower-case
	// letters, digits, _ or -.
	ID string
	// Secret is at least 32 random bytes. It is a secret: never logged.
	Secret []byte
	// Until is the end of a retired key's grace period: it verifies
	// tokens until then and signs none. The zero time for the signing key.
	Until time.Time
}

// MinSecret is the least length of a Key's secret.
const MinSecret = 32

var keyID = regexp.MustCompile(`^[a-z0-9_-]{1,16}$`)

// Signer makes and verifies tokens. It is safe for concurrent use.
type Signer struct {
	keys  []Key // keys[0] signs
	dummy []byte
	now   func() time.Time
}

// NewSigner returns a signer whose first key signs and whose other keys,
// retired, verify until their Until.
func NewSigner(keys []Key) (*Signer, error) {
	if len(keys) == 0 {
		return nil, errors.New("unsubscribe: no key (want at least one of 32 bytes or more)")
	}
	seen := map[string]bool{}
	for i, k := range keys {
		if !keyID.MatchString(k.ID) {
			return nil, fmt.Errorf("unsubscribe: key %d: id %q: want 1 to 16 lower-case letters, digits, _ or -", i+1, k.ID)
		}
		if seen[k.ID] {
			return nil, fmt.Errorf("unsubscribe: key %s: two keys have this id", k.ID)
		}
		seen[k.ID] = true
		if len(k.Secret) < MinSecret {
			return nil, fmt.Errorf("unsubscribe: key %s: secret of %d bytes, want at least %d", k.ID, len(k.Secret), MinSecret)
		}
		if i == 0 && !k.Until.IsZero() {
			return nil, fmt.Errorf("unsubscribe: key %s: the first key signs, it has no end of grace", k.ID)
		}
		if i > 0 && k.Until.IsZero() {
			return nil, fmt.Errorf("unsubscribe: key %s: a retired key needs the end of its grace period", k.ID)
		}
	}
	dummy := sha256.Sum256(keys[0].Secret)
	return &Signer{keys: keys, dummy: dummy[:], now: time.Now}, nil
}

// SetClock replaces the signer's clock (tests).
func (s *Signer) SetClock(now func() time.Time) { s.now = now }

// Claim is what a token says.
type Claim struct {
	KeyID     string
	List      string
	MailID    string // the mail's Message-ID, or "sha256:" and a hash of a long one
	Recipient string // normalized
}

// maxMailID is the longest Message-ID a token carries as it is.
const maxMailID = 128

// MailID is the mail id a token carries for a Message-ID.
func MailID(messageID string) string {
	if len(messageID) <= maxMailID && !strings.ContainsAny(messageID, "\n\x00") {
		return messageID
	}
	h := sha256.Sum256([]byte(messageID))
	return "sha256:" + hex.EncodeToString(h[:16])
}

const macLabel = "mailspool-unsubscribe-1\x00"

func mac(secret []byte, payload string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(macLabel))
	m.Write([]byte(payload))
	return m.Sum(nil)
}

var b64 = base64.RawURLEncoding

// Token signs c with the signing key (c.KeyID is ignored).
func (s *Signer) Token(c Claim) (string, error) {
	for _, f := range []string{c.List, c.MailID, c.Recipient} {
		if f == "" || strings.ContainsAny(f, "\n\x00") {
			return "", fmt.Errorf("unsubscribe: a token field is empty or holds a line break")
		}
	}
	k := s.keys[0]
	payload := k.ID + "\n" + c.List + "\n" + c.MailID + "\n" + c.Recipient
	return b64.EncodeToString([]byte(payload)) + "." + b64.EncodeToString(mac(k.Secret, payload)), nil
}

// Verify returns what token says, and false when it does not verify: an
// altered token, an unknown key, a key past its grace. It does the same
// work whatever is wrong: the MAC is computed (under a dummy key when the
// key is unknown) and compared in constant time.
func (s *Signer) Verify(token string) (Claim, bool) {
	p, sig, _ := strings.Cut(token, ".")
	payload, perr := b64.DecodeString(p)
	given, serr := b64.DecodeString(sig)
	fields := strings.SplitN(string(payload), "\n", 4)
	for len(fields) < 4 {
		fields = append(fields, "")
	}
	now := s.now()
	secret, live := s.dummy, 0
	for _, k := range s.keys { // no early exit
		if subtle.ConstantTimeCompare([]byte(k.ID), []byte(fields[0])) == 1 {
			secret = k.Secret
			if k.Until.IsZero() || now.Before(k.Until) {
				live = 1
			}
		}
	}
	ok := subtle.ConstantTimeCompare(mac(secret, string(payload)), given) & live
	if ok != 1 || perr != nil || serr != nil || fields[1] == "" || fields[2] == "" || fields[3] == "" {
		return Claim{}, false
	}
	return Claim{KeyID: fields[0], List: fields[1], MailID: fields[2], Recipient: fields[3]}, true
}

// listOfToken reads the list a token names without verifying it: for
// the claim, which reads headers this package wrote.
func listOfToken(token string) string {
	p, _, _ := strings.Cut(token, ".")
	payload, err := b64.DecodeString(p)
	if err != nil {
		return ""
	}
	f := strings.SplitN(string(payload), "\n", 4)
	if len(f) != 4 {
		return ""
	}
	return f[1]
}

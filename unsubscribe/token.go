package unsubscribe

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
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
	keys      []Key         // keys[0] signs
	aeads     []cipher.AEAD // by key, for sealed tokens
	dummy     []byte
	dummyAEAD cipher.AEAD
	now       func() time.Time
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
	s := &Signer{keys: keys, dummy: dummy[:], now: time.Now}
	for _, k := range keys {
		a, err := sealer(k.Secret)
		if err != nil {
			return nil, err
		}
		s.aeads = append(s.aeads, a)
	}
	var err error
	if s.dummyAEAD, err = sealer(s.dummy); err != nil {
		return nil, err
	}
	return s, nil
}

// sealer is the AES-256-GCM of a key's secret, under a key of its own
// derived with HKDF-SHA-256, so that one secret never serves two
// algorithms.
func sealer(secret []byte) (cipher.AEAD, error) {
	key, err := hkdf.Key(sha256.New, secret, nil, "mailspool unsubscribe token sealing", 32)
	if err != nil {
		return nil, fmt.Errorf("unsubscribe: deriving the sealing key: %w", err)
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("unsubscribe: %w", err)
	}
	return cipher.NewGCM(b)
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

// A token is the signing key's id, "~", and the base64url of a random
// nonce and the claim sealed with AES-256-GCM (the key id is in the
// authenticated data): the link names no recipient that a proxy's access
// log, a link scanner or a forwarded mail could read. Tokens of the first
// form (the claim in base64url, "." and its HMAC-SHA-256) are still
// verified, for the links of mail sent before; none are made.
const (
	sealSep   = "~" // never in base64url, so the forms cannot be confused
	sealLabel = "mailspool-unsubscribe-2\x00"
)

// Token seals c with the signing key (c.KeyID is ignored).
func (s *Signer) Token(c Claim) (string, error) {
	for _, f := range []string{c.List, c.MailID, c.Recipient} {
		if f == "" || strings.ContainsAny(f, "\n\x00") {
			return "", fmt.Errorf("unsubscribe: a token field is empty or holds a line break")
		}
	}
	k, a := s.keys[0], s.aeads[0]
	nonce := make([]byte, a.NonceSize(), a.NonceSize()+len(c.List)+len(c.MailID)+len(c.Recipient)+2+a.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("unsubscribe: %w", err)
	}
	sealed := a.Seal(nonce, nonce, []byte(c.List+"\n"+c.MailID+"\n"+c.Recipient), []byte(sealLabel+k.ID))
	return k.ID + sealSep + b64.EncodeToString(sealed), nil
}

// key finds the key named id without an early exit: its AEAD (the dummy
// one when the id is unknown), its secret (the dummy), and whether it
// may still verify at now (live: 1).
func (s *Signer) key(id string, now time.Time, graceToo bool) (a cipher.AEAD, secret []byte, live int) {
	a, secret = s.dummyAEAD, s.dummy
	for i, k := range s.keys {
		if subtle.ConstantTimeCompare([]byte(k.ID), []byte(id)) == 1 {
			a, secret = s.aeads[i], k.Secret
			if graceToo || k.Until.IsZero() || now.Before(k.Until) {
				live = 1
			}
		}
	}
	return a, secret, live
}

// open returns the claim of a sealed token, and false when it does not
// open: altered, an unknown key, or (unless graceToo) a key past its
// grace. The work is the same whatever is wrong: the tag is always
// checked, under the dummy key when the id is unknown.
func (s *Signer) open(token string, graceToo bool) (Claim, bool) {
	id, blob, _ := strings.Cut(token, sealSep)
	raw, derr := b64.DecodeString(blob)
	a, _, live := s.key(id, s.now(), graceToo)
	if derr != nil || len(raw) < a.NonceSize()+a.Overhead() {
		raw = make([]byte, a.NonceSize()+a.Overhead()) // fails the tag, after the same work
		live = 0
	}
	plain, err := a.Open(nil, raw[:a.NonceSize()], raw[a.NonceSize():], []byte(sealLabel+id))
	fields := strings.SplitN(string(plain), "\n", 3)
	if err != nil || live != 1 || len(fields) != 3 || fields[0] == "" || fields[1] == "" || fields[2] == "" {
		return Claim{}, false
	}
	return Claim{KeyID: id, List: fields[0], MailID: fields[1], Recipient: fields[2]}, true
}

// Verify returns what token says, and false when it does not verify: an
// altered token, an unknown key, a key past its grace. It does the same
// work whatever is wrong: the tag or MAC is computed (under a dummy key
// when the key is unknown) and compared in constant time.
func (s *Signer) Verify(token string) (Claim, bool) {
	if strings.Contains(token, sealSep) {
		return s.open(token, false)
	}
	p, sig, _ := strings.Cut(token, ".")
	payload, perr := b64.DecodeString(p)
	given, serr := b64.DecodeString(sig)
	fields := strings.SplitN(string(payload), "\n", 4)
	for len(fields) < 4 {
		fields = append(fields, "")
	}
	_, secret, live := s.key(fields[0], s.now(), false)
	ok := subtle.ConstantTimeCompare(mac(secret, string(payload)), given) & live
	if ok != 1 || perr != nil || serr != nil || fields[1] == "" || fields[2] == "" || fields[3] == "" {
		return Claim{}, false
	}
	return Claim{KeyID: fields[0], List: fields[1], MailID: fields[2], Recipient: fields[3]}, true
}

// listOf reads the list a token names, for the claim, which reads headers
// this package wrote: a sealed token is opened under any configured key,
// even past its grace (a mail queued before a rotation is still that
// list's); a token of the first form is read without verifying.
func (s *Signer) listOf(token string) string {
	if strings.Contains(token, sealSep) {
		c, _ := s.open(token, true)
		return c.List
	}
	return listOfToken(token)
}

// listOfToken reads the list a token of the first form names without
// verifying it.
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

package unsubscribe

import (
	"bytes"
	"strings"
	"testing"
)

// BenchmarkVerify compares the cost of verifying a valid token with that
// of the invalid ones an attacker would try (a flipped tag bit, a flipped
// bit of the sealed claim, an unknown key id): the work is the same by construction
// (the MAC is always computed, under a dummy key when the id is unknown,
// and compared in constant time), and the ratios of these figures show it.
// go test -run '^$' -bench Verify ./unsubscribe
func BenchmarkVerify(b *testing.B) {
	s, err := NewSigner([]Key{{ID: "k1", Secret: bytes.Repeat([]byte{1}, 32)}})
	if err != nil {
		b.Fatal(err)
	}
	tok, err := s.Token(Claim{List: "news", MailID: "20261206.abcdef@shop.example", Recipient: "ann@example.com"})
	if err != nil {
		b.Fatal(err)
	}
	other, err := NewSigner([]Key{{ID: "k9", Secret: bytes.Repeat([]byte{2}, 32)}})
	if err != nil {
		b.Fatal(err)
	}
	unknown, _ := other.Token(Claim{List: "news", MailID: "20261206.abcdef@shop.example", Recipient: "ann@example.com"})
	_, blob, _ := strings.Cut(tok, sealSep)
	for _, c := range []struct{ name, tok string }{
		{"valid", tok},
		{"tag-bit", flipped(tok, 8*len(mustDecode(blob))-3)},
		{"sealed-bit", flipped(tok, 8*12+5)},
		{"unknown-key", unknown},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				s.Verify(c.tok)
			}
		})
	}
}

func mustDecode(s string) []byte {
	b, _ := b64.DecodeString(s)
	return b
}

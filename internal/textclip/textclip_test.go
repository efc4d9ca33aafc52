package textclip

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestPrefix(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exact", 5, "exact"},
		{"abcdef", 3, "abc"},
		{"éé", 3, "é"},       // é is 2 bytes: the second one would be cut in half
		{"a€b", 3, "a"},      // € is 3 bytes
		{"a€b", 4, "a€"},     // ends right after €
		{"😀x", 3, ""},        // a 4-byte character does not fit at all
		{"anything", 0, ""},  // no room
		{"anything", -1, ""}, // no room
		{"日本語テキスト", 7, "日本"}, // 3-byte characters
	} {
		got := Prefix(tc.s, tc.n)
		assert.Equal(t, tc.want, got, "Prefix(%q, %d)", tc.s, tc.n)
		assert.True(t, utf8.ValidString(got), "Prefix(%q, %d) = %q is not valid UTF-8", tc.s, tc.n, got)
	}
}

func TestClip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly ten", 11, "exactly ten"},
		{strings.Repeat("x", 20), 10, "xxxxxxx..."},
		{strings.Repeat("é", 20), 10, "ééé..."},   // 7 bytes of room: 3 characters
		{"word and more text", 12, "word and..."}, // no space before the ellipsis
	} {
		got := Clip(tc.s, tc.n)
		assert.Equal(t, tc.want, got, "Clip(%q, %d)", tc.s, tc.n)
		assert.LessOrEqual(t, len(got), tc.n, "Clip(%q, %d) = %q is too long", tc.s, tc.n, got)
		assert.True(t, utf8.ValidString(got), "Clip(%q, %d) = %q is not valid UTF-8", tc.s, tc.n, got)
	}
}

func FuzzClip(f *testing.F) {
	f.Add("héllo wörld", 7)
	f.Add(strings.Repeat("€", 100), 200)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = 3 + int(uint(n)%300)
		got := Clip(s, n)
		if len(got) > n {
			t.Fatalf("Clip(%q, %d) = %q: %d bytes", s, n, got, len(got))
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Clip(%q, %d) = %q split a character", s, n, got)
		}
		if len(s) <= n && got != s {
			t.Fatalf("Clip(%q, %d) = %q changed a text that fits", s, n, got)
		}
	})
}

// Package textclip cuts text to a length limit in bytes without splitting a
// UTF-8 character. It is the one truncator of the module: for error details
// taken from a provider, the stored last error, and what the CLI prints.
package textclip

import (
	"strings"
	"unicode/utf8"
)

// Ellipsis ends a text that [Clip] cut.
const Ellipsis = "..."

// Prefix returns the longest prefix of s that is at most n bytes long and
// does not end inside a UTF-8 character: s itself when it fits.
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// Clip returns s when it is at most n bytes long. Otherwise it returns a
// prefix of s that ends on a character boundary, without trailing spaces,
// followed by [Ellipsis], at most n bytes in all (n is at least
// len(Ellipsis)).
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.TrimRight(Prefix(s, n-len(Ellipsis)), " ") + Ellipsis
}

package statuspage

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// maskAddress masks an address's local part but its first character:
// john@example.com → j***@example.com. The domain stays: it tells which
// provider refused.
func maskAddress(addr string) string {
	at := strings.LastIndexByte(addr, '@')
	if at < 0 {
		return "***"
	}
	return maskLocal(addr[:at]) + addr[at:]
}

// maskLocal keeps a local part's first character.
func maskLocal(local string) string {
	_, n := utf8.DecodeRuneInString(local)
	return local[:n] + "***"
}

// addressLike finds what looks like an address in free text (a reply
// quoting the recipient, a body greeting it). Its groups are the local
// part, the '@' as written and the domain.
//
// The local part is everything an address may have there (RFC 5322
// atext, so ' & / = ? too, and UTF-8) and HTML character references of
// such characters (an HTML body shown as source: tom&amp;jerry,
// o&#39;brien, zoe&#43;news), or a quoted string. In a URL this takes
// more than the address (back to the scheme's ':' or a '<' or '"'):
// there '?', '=', '&' and '/' are delimiters, but they are also valid in
// a local part, and masking too much is safe where masking too little is
// not.
//
// The '@' may be written percent-encoded (%40; %2540 in a URL inside
// another one's query, as a click-tracking link wraps it), or as an HTML
// character reference (&#64;, &#x40;, &commat;).
var addressLike = regexp.MustCompile(
	`((?:[^\s<>"(),;:\[\]@]|&(?i:amp|apos|#[0-9]+|#x[0-9a-f]+);)+|"[^"\r\n]+")` +
		`(@|%(?:25)*40|&#0*64;|&#[xX]0*40;|&commat;)` +
		`([\p{L}\p{N}.%-]+\.[\p{L}\p{N}-]+)`)

// maskText masks every address in s.
func maskText(s string) string {
	ms := addressLike.FindAllStringSubmatchIndex(s, -1)
	if ms == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range ms {
		b.WriteString(s[last:m[0]])
		b.WriteString(maskLocal(s[m[2]:m[3]]))
		b.WriteString(s[m[4]:m[1]]) // the '@' and the domain, as written
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

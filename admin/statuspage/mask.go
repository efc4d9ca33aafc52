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
	local := addr[:at]
	_, n := utf8.DecodeRuneInString(local)
	return local[:n] + "***" + addr[at:]
}

// addressLike finds what looks like an address in free text (a reply
// quoting the recipient, a body greeting it).
var addressLike = regexp.MustCompile(`[^\s<>"'(),;:\[\]@?=&/]+@[\p{L}\p{N}.-]+\.[\p{L}\p{N}-]+`)

// maskText masks every address in s.
func maskText(s string) string {
	return addressLike.ReplaceAllStringFunc(s, maskAddress)
}

package classify

import (
	"strings"
	"unicode"

	"github.com/mailspool/mailspool/internal/textclip"
)

// maxDetail caps the length in bytes of a Detail built from a provider's text.
const maxDetail = 200

// cleanDetail returns s as one short line that is safe to store: invalid
// UTF-8 and control characters (CR, LF, tabs, NUL, ...) become spaces, runs
// of spaces collapse, and the result is cut at a rune boundary to at most
// maxDetail bytes, ending in "..." when it was cut.
func cleanDetail(s string) string {
	s = strings.ToValidUTF8(s, " ")
	var b strings.Builder
	space := false
	for _, r := range s {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return textclip.Clip(b.String(), maxDetail)
}

package queue

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// controlProblem describes why s cannot be a name or key an operator reads
// (a template name, an idempotency key, a pause reason), or returns "": it
// must be valid UTF-8 without control characters (C0 with CR, LF and tab,
// DEL, C1) or format characters (Unicode Cf: bidirectional controls,
// zero-width characters), which a terminal would act on or hide.
func controlProblem(s string) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return fmt.Sprintf("contains the control character %U", r)
		}
	}
	return ""
}

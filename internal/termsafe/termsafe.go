// Package termsafe renders text that came from outside (a subject, a
// template name, a pause reason, a server's answer) for a terminal or a
// log line: control characters are shown escaped instead of acted on.
package termsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape returns s with every control character (C0 including CR, LF and
// tab, DEL, C1), every bidirectional control and every invalid UTF-8 byte
// written as a Go escape (\x1b, \n, \u202e), so
// that "ESC ]52;c;..." cannot set the clipboard, "ESC [2J" cannot clear
// the screen, a newline cannot forge another line and a right-to-left
// override cannot reorder what follows. Text without them is returned
// unchanged.
func Escape(s string) string { return escape(s, false) }

// EscapeBody is Escape for a mail body shown on a terminal: line feeds and
// tabs are kept, so the text reads as lines; every other control character
// is escaped.
func EscapeBody(s string) string { return escape(s, true) }

func escape(s string, lines bool) string {
	if !needsEscape(s, lines) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case lines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

func needsEscape(s string, lines bool) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if lines && (r == '\n' || r == '\t') {
			i += size
			continue
		}
		if r == utf8.RuneError && size == 1 || r < 0x20 || r == 0x7f || unsafe(r) {
			return true
		}
		i += size
	}
	return false
}

// unsafe reports a C1 control or a bidirectional control.
func unsafe(r rune) bool {
	return r >= 0x80 && r < 0xa0 || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c || unicode.Is(unicode.Bidi_Control, r)
}

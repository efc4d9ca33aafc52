package termsafe

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"Willkommen — 欢迎":           "Willkommen — 欢迎",
		"a\x1b]52;c;aGk=\x07b":      `a\x1b]52;c;aGk=\x07b`,
		"\x1b[2Jcleared":            `\x1b[2Jcleared`,
		"line\nforged: ok\r":        `line\nforged: ok\r`,
		"tab\there":                 `tab\there`,
		`back\slash`:                `back\slash`,
		"c1\u009bcsi":               `c1\u009bcsi`,
		"rlo\u202Eevil":             `rlo\u202eevil`,
		"bad\xffbyte":               `bad\xffbyte`,
		"del\x7f":                   `del\x7f`,
		"isolate\u2066x\u2069 done": `isolate\u2066x\u2069 done`,
	} {
		assert.Equal(t, want, Escape(in), "%q", in)
	}
	assert.Equal(t, "line 1\n\tline 2 \\x1b[2J\\r", EscapeBody("line 1\n\tline 2 \x1b[2J\r"))
}

package transport

import (
	"mime/quotedprintable"
	"strings"
	"testing"
)

// TestQPSizeBoundsTheEncoding: qpSize is never below what a
// quoted-printable writer makes of a body, whatever its lines and bytes
// (a space or tab at the end of a line is escaped, a CR, LF or CRLF is one
// CRLF), and not far above it, so that a lane's size limit holds.
func TestQPSizeBoundsTheEncoding(t *testing.T) {
	bodies := map[string]string{
		"prose":       strings.Repeat("Hello, please confirm your address by opening the link below. ", 40),
		"short lines": strings.Repeat("- item\n", 500),
		"escapes":     strings.Repeat("a=b\x01\xff\r\n", 300),
		"non-ascii":   strings.Repeat("Grüße aus Köln, 東京 ", 100),
		"one line":    strings.Repeat("x", 5000),
		"html":        `<html><body><p style="color:#333">` + strings.Repeat("<b>bold</b> text ", 200) + `</p></body></html>`,
		"end spaces":  strings.Repeat("Order line item, quantity 1 \n", 300),
		"end tabs":    strings.Repeat("a\t\n\t\r\n \r", 300) + " ",
		"CRLF":        strings.Repeat("line\r\n", 500),
		"CR":          strings.Repeat("line\r", 500),
		"blank lines": strings.Repeat("\n\r\n\r\r\n", 300),
		"long lines":  strings.Repeat(strings.Repeat("y", 75)+"\n"+strings.Repeat("z", 76)+" \n"+strings.Repeat("=", 40)+"\n", 100),
	}
	for name, s := range bodies {
		var b strings.Builder
		w := quotedprintable.NewWriter(&b)
		if _, err := w.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got, want := qpSize(s), b.Len()
		if got < want || got > want+want/32+16 {
			t.Errorf("%s: qpSize = %d, the encoding is %d bytes: want at least that and at most 1/32 more", name, got, want)
		}
	}
}

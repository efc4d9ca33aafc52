package transport

import (
	"mime/quotedprintable"
	"strings"
	"testing"
)

// TestQPSizeBoundsTheEncoding: qpSize is never below what a
// quoted-printable writer makes of a body, whatever its lines and bytes,
// and not far above it (a CR before a LF, escaped when alone, is counted
// as escaped), so that a lane's size limit holds.
func TestQPSizeBoundsTheEncoding(t *testing.T) {
	bodies := map[string]string{
		"prose":       strings.Repeat("Hello, please confirm your address by opening the link below. ", 40),
		"short lines": strings.Repeat("- item\n", 500),
		"escapes":     strings.Repeat("a=b\x01\xff\r\n", 300),
		"non-ascii":   strings.Repeat("Grüße aus Köln, 東京 ", 100),
		"one line":    strings.Repeat("x", 5000),
		"html":        `<html><body><p style="color:#333">` + strings.Repeat("<b>bold</b> text ", 200) + `</p></body></html>`,
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
		if got < want || got > want+want/3+16 {
			t.Errorf("%s: qpSize = %d, the encoding is %d bytes: want at least that and at most a third more", name, got, want)
		}
	}
}

package classify

import (
	"strconv"
	"strings"
	"unicode"
)

// embeddedReply finds a 4xx or 5xx SMTP reply inside the text of an error
// that does not expose it as a typed value. A reply is taken only where
// libraries put one:
//
//   - at the start of a line: "550 5.1.1 ..." or "550-...";
//   - after "SMTP error ": "SMTP error 550: ..." (emersion/go-smtp);
//   - after ": " or ", " (wrapping and lists, e.g. "SMTP AUTH failed: 535
//     5.7.8 ..." or go-mail's "sending SMTP RCPT TO command: 550 \"5.1.1
//     ...\""), and then only when a quoted text, an enhanced code, an
//     upper-case letter or "<" follows, and not after "status: ".
//
// Three digits that are part of a longer number, an IP address, a port or
// a word ("10.0.0.550:25", "127.0.0.1:45501", "queued as 550ABC",
// "took: 450 ms") are never a reply. A quoted text is unquoted; otherwise
// the text runs to the end of the line.
func embeddedReply(s string) (code int, text string, ok bool) {
	end := -1 // end of the line holding s[i], found once per line
	for i := 0; i+3 <= len(s); i++ {
		code, ok := replyCode(s[i : i+3])
		if !ok || code < 400 || (i > 0 && isDigit(s[i-1])) {
			continue
		}
		if end < i {
			if end = strings.IndexByte(s[i:], '\n'); end < 0 {
				end = len(s)
			} else {
				end += i
			}
		}
		if text, ok := replyAt(s, i, s[i+3:end]); ok {
			return code, text, true
		}
	}
	return 0, "", false
}

// replyAt returns the text of the reply whose code starts at s[i] and is
// followed by line up to the end of its line, if the context makes it one
// (see embeddedReply).
func replyAt(s string, i int, line string) (text string, ok bool) {
	switch {
	case i == 0 || s[i-1] == '\n':
		if line == "" {
			return "", true
		}
		if line[0] != ' ' && line[0] != '-' {
			return "", false
		}
		return unquote(line[1:]), true
	case hasSuffixFold(s[:i], "smtp error "):
		if line != "" && line[0] != ':' && line[0] != ' ' {
			return "", false
		}
		return unquote(strings.TrimLeft(line, ": ")), true
	case strings.HasSuffix(s[:i], ": ") || strings.HasSuffix(s[:i], ", "):
		if hasSuffixFold(s[:i], "status: ") || hasSuffixFold(s[:i], "statuscode: ") ||
			len(line) < 2 || line[0] != ' ' || !replyTextStart(line[1:]) {
			return "", false
		}
		return unquote(line[1:]), true
	}
	return "", false
}

// replyTextStart reports whether t starts like an SMTP reply text as a
// library prints it: Go's quoted text, an enhanced code, a capital letter,
// or an address in angle brackets.
func replyTextStart(t string) bool {
	if t[0] == '"' || t[0] == '<' {
		return true
	}
	if _, _, ok := leadingEnhanced(t); ok {
		return true
	}
	for _, r := range t {
		return unicode.IsUpper(r)
	}
	return false
}

// unquote returns the Go-quoted string at the start of t unquoted (Go 1.26
// net/textproto.Error prints its text with %q), or t as it is.
func unquote(t string) string {
	if q, err := strconv.QuotedPrefix(t); err == nil {
		if u, err := strconv.Unquote(q); err == nil {
			return u
		}
	}
	return t
}

// hasSuffixFold is strings.HasSuffix ignoring ASCII case.
func hasSuffixFold(s, suffix string) bool {
	return len(s) >= len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix)
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

package classify

import (
	"strconv"
	"strings"
)

// enhanced is a parsed RFC 3463 enhanced status code, class.subject.detail.
type enhanced struct {
	code    string // as the server wrote it, e.g. "5.1.1"; "" when absent
	class   int    // 2, 4 or 5
	subject int
	detail  int
}

// parseEnhanced parses s as an enhanced status code: a class of 2, 4 or 5,
// then a subject and a detail of one to three digits each. ok is false for
// anything else ("9.9.9", "5.1", "5.1.1.1").
func parseEnhanced(s string) (e enhanced, ok bool) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return enhanced{}, false
	}
	var n [3]int
	for i, p := range parts {
		if len(p) < 1 || len(p) > 3 || strings.Trim(p, "0123456789") != "" {
			return enhanced{}, false
		}
		n[i], _ = strconv.Atoi(p)
	}
	if len(parts[0]) != 1 || (n[0] != 2 && n[0] != 4 && n[0] != 5) {
		return enhanced{}, false
	}
	return enhanced{code: s, class: n[0], subject: n[1], detail: n[2]}, true
}

// leadingEnhanced splits an enhanced status code off the start of text, as
// servers write it ("5.1.1 No such user"). ok is false when text does not
// start with one followed by a space or the end.
func leadingEnhanced(text string) (e enhanced, rest string, ok bool) {
	word, rest, _ := strings.Cut(text, " ")
	if e, ok = parseEnhanced(word); !ok {
		return enhanced{}, text, false
	}
	return e, strings.TrimLeft(rest, " "), true
}

// is reports whether e is class.subject.detail for any class; for example
// e.is(7, 8) matches both 4.7.8 and 5.7.8.
func (e enhanced) is(subject, detail int) bool {
	return e.code != "" && e.subject == subject && e.detail == detail
}

package classify

import (
	"strconv"
	"strings"

	"github.com/mailspool/mailspool/transport"
)

// SMTPReply classifies a raw SMTP reply as a server sends it, one line or
// several ("550-5.1.1 ...\r\n550 5.1.1 ..."). It returns nil for a 2xx or 3xx
// reply; otherwise a *transport.Error whose Code is the basic reply code,
// Enhanced the RFC 3463 code at the start of the text (if any), Detail the
// reply text as one short line without the repeated enhanced code, and
// RetryAfter a hint found in the text ("try again in 5 minutes"). The kind
// follows the rules in the package documentation. An empty or unparsable
// reply is Temporary with a Detail that says so.
func SMTPReply(reply string) error {
	return Session{}.SMTPReply(reply)
}

// SMTPReply is [SMTPReply] for a reply of this session.
func (s Session) SMTPReply(reply string) error {
	code, lines, ok := parseReply(reply)
	if !ok {
		if strings.TrimSpace(reply) == "" {
			return &transport.Error{Kind: transport.Temporary, Rule: "smtp-unparsable", Detail: "empty smtp reply"}
		}
		return &transport.Error{Kind: transport.Temporary, Rule: "smtp-unparsable", Detail: cleanDetail("unparsable smtp reply: " + reply)}
	}
	return s.SMTP(code, "", strings.Join(lines, "\n"))
}

// SMTP classifies an SMTP reply that a library has already split into its
// basic code, enhanced code and text, with the same result as [SMTPReply].
// enhanced may be empty (it is then taken from the start of text, if there);
// text may be empty or hold several lines separated by "\n" (as
// net/textproto joins them). A code outside 200-599 is Temporary with a
// Detail that says so. It knows nothing of the session the reply came
// from; an adapter that does uses [Session.SMTP].
func SMTP(code int, enhanced, text string) error {
	return Session{}.SMTP(code, enhanced, text)
}

// Session is what an adapter knows of the SMTP session a reply came
// from, for the rules that depend on it (see the package documentation).
// The zero Session knows nothing.
type Session struct {
	// Relay reports that the lane submits through a relay (SMTP AUTH, a
	// submission port, an ESP's SMTP endpoint) rather than delivering to
	// the recipient's own mail server: a relay's words about a sender,
	// domain, account or policy are about us.
	Relay bool
	// Command is the command the reply answered: "MAIL", "RCPT", "DATA"
	// (its 354, or the reply after the terminator), "AUTH", "EHLO", ...;
	// empty when unknown. A 5xx at MAIL FROM is about our sender (or the
	// declared size); at AUTH about the lane.
	Command string
}

// SMTP is [SMTP] for a reply of this session.
func (s Session) SMTP(code int, enhanced, text string) error {
	if code < 200 || code > 599 {
		return &transport.Error{Kind: transport.Temporary, Rule: "smtp-invalid-code", Detail: cleanDetail("invalid smtp reply code " + strconv.Itoa(code) + ": " + text)}
	}
	if code < 400 {
		return nil
	}
	enh, ok := parseEnhanced(strings.TrimSpace(enhanced))
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	if !ok {
		enh, _, _ = leadingEnhanced(strings.TrimSpace(lines[0]))
	}
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if e, rest, ok := leadingEnhanced(l); ok && e.code == enh.code {
			l = rest
		}
		lines[i] = l
	}
	full := strings.Join(lines, " ")
	facts := replyFacts{code: code, enh: enh, low: strings.ToLower(full), at: strings.ToUpper(s.Command), relay: s.Relay}
	rule := decide(&facts)
	return &transport.Error{
		Kind:       rule.kind,
		Code:       code,
		Enhanced:   enh.code,
		RetryAfter: textRetryAfter(full),
		Scope:      rule.scopeOf(&facts),
		Rule:       rule.name,
		Detail:     cleanDetail(full),
	}
}

// parseReply splits a raw reply into its basic code and the text of each
// line. Every line should start with the code and a space or hyphen; a line
// that does not is kept whole as text. ok is false when the first non-empty
// line has no valid code.
func parseReply(reply string) (code int, lines []string, ok bool) {
	raw := strings.Split(strings.TrimSpace(strings.ReplaceAll(reply, "\r\n", "\n")), "\n")
	code, text, ok := replyLine(raw[0])
	if !ok {
		return 0, nil, false
	}
	lines = append(lines, text)
	for _, l := range raw[1:] {
		if c, text, ok := replyLine(l); ok && c == code {
			l = text
		}
		lines = append(lines, l)
	}
	return code, lines, true
}

// replyLine parses one reply line "NNN text", "NNN-text" or "NNN".
func replyLine(line string) (code int, text string, ok bool) {
	line = strings.TrimRight(line, "\r")
	if len(line) < 3 || (len(line) > 3 && line[3] != ' ' && line[3] != '-') {
		return 0, "", false
	}
	code, ok = replyCode(line[:3])
	if !ok {
		return 0, "", false
	}
	if len(line) > 3 {
		text = line[4:]
	}
	return code, text, true
}

// replyCode parses three digits forming an SMTP reply code from 200 to 599.
func replyCode(s string) (int, bool) {
	if len(s) != 3 || s[0] < '2' || s[0] > '5' || s[1] < '0' || s[1] > '9' || s[2] < '0' || s[2] > '9' {
		return 0, false
	}
	return int(s[0]-'0')*100 + int(s[1]-'0')*10 + int(s[2]-'0'), true
}

package transport

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/mail"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Size limits enforced by [Message.Validate].
const (
	// MaxMessageSize bounds the sum of subject, bodies and extra headers.
	MaxMessageSize = 10 << 20
	// MaxLineLength bounds the subject and each header value (RFC 5322 2.1.1).
	MaxLineLength = 998
	// MaxAddressLength bounds an address (RFC 5321 4.5.3.1, as used in practice).
	MaxAddressLength = 254
	// MaxHeaders bounds the number of extra headers.
	MaxHeaders = 50
)

// Message is one mail to one recipient, fully rendered: what an adapter
// sends. One recipient per message keeps outcomes per address (a 550 for one
// recipient fails that row only) and rate limits per recipient exact.
type Message struct {
	// MessageID is the Message-ID header value without angle brackets
	// ("id@example.com"). The queue sets it at enqueue time so every retry of
	// a row carries the same id; adapters generate one when it is empty.
	MessageID string
	From      mail.Address
	To        mail.Address
	// ReplyTo is optional: a zero Address means no Reply-To header.
	ReplyTo mail.Address
	Subject string
	// Text and HTML are the final bodies, UTF-8. At least one is non-empty;
	// with both the mail is multipart/alternative.
	Text string
	HTML string
	// Headers are extra header fields (List-Unsubscribe, X-Campaign, ...),
	// each name at most once (in any case): adapters may not keep their
	// order (go-mail sorts them, SendGrid takes a JSON object). Fields the
	// adapter sets itself are rejected by Validate; see [ReservedHeader].
	Headers []Header
	// Attachments are files sent with the mail: attached, or shown inside
	// the HTML body (Inline, referenced as cid:ContentID). See [Attachment].
	Attachments []Attachment
	// ReturnPath, when not "", is the envelope sender (SMTP MAIL FROM, the
	// Return-Path the receiver writes) instead of From: the address
	// delivery status notifications go to. The queue's worker sets it from
	// the lane (a VERP address, package verp) at each send; it is not
	// stored. The SMTP adapter sends it as MAIL FROM; Amazon SES as the
	// FeedbackForwardingEmailAddress; SendGrid's API has no such field and
	// ignores it.
	ReturnPath string
}

// Header is one extra header field.
type Header struct {
	Name  string
	Value string
}

// ErrInvalidMessage matches every error returned by [Message.Validate]
// (errors.Is).
var ErrInvalidMessage = errors.New("transport: invalid message")

// ValidationError names the field of a Message that is invalid and why.
type ValidationError struct {
	Field  string // e.g. "to.address", "subject", "headers[2].value"
	Reason string
}

func (e *ValidationError) Error() string {
	return "transport: invalid message: " + e.Field + ": " + e.Reason
}

// Is reports whether target is ErrInvalidMessage.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalidMessage }

// reserved are the header fields an adapter derives from Message fields; an
// extra header with one of these names could override them or add recipients.
var reserved = map[string]bool{
	"from": true, "to": true, "cc": true, "bcc": true, "sender": true,
	"reply-to": true, "subject": true, "message-id": true, "date": true,
	"mime-version": true, "content-type": true, "content-transfer-encoding": true,
	"return-path": true,
}

// ReservedHeader reports whether name (any case) is a header field that
// adapters set from Message fields and that Headers may not contain.
func ReservedHeader(name string) bool { return reserved[strings.ToLower(name)] }

// Size is the number of bytes the message's content takes: subject, bodies
// and extra headers. Limits are checked against it.
func (m *Message) Size() int {
	n := len(m.Subject) + len(m.Text) + len(m.HTML)
	for _, h := range m.Headers {
		n += len(h.Name) + len(h.Value) + 4
	}
	return n
}

// Validate reports the first problem that would make m unsafe or impossible
// to send: a missing or unparsable address, a domain label that is empty,
// longer than 63 bytes or starts or ends with a hyphen, a bidirectional
// control character in an address or name, a format character (Unicode
// category Cf) in an address, CR, LF or NUL in any header value
// or name (header injection), an invalid, reserved or repeated header name, invalid
// UTF-8, NUL in a body, neither a text nor an HTML body, or a size over the limits above.
// The returned error is a [*ValidationError] that matches [ErrInvalidMessage].
func (m *Message) Validate() error {
	if m == nil {
		return &ValidationError{Field: "message", Reason: "is nil"}
	}
	if err := validateAddress("from", m.From, true); err != nil {
		return err
	}
	if err := validateAddress("to", m.To, true); err != nil {
		return err
	}
	if err := validateAddress("reply_to", m.ReplyTo, false); err != nil {
		return err
	}
	if err := validateAddress("return_path", mail.Address{Address: m.ReturnPath}, false); err != nil {
		return err
	}
	if m.MessageID != "" {
		if reason := messageIDProblem(m.MessageID); reason != "" {
			return &ValidationError{Field: "message_id", Reason: reason}
		}
	}
	if reason := headerValueProblem(m.Subject); reason != "" {
		return &ValidationError{Field: "subject", Reason: reason}
	}
	if m.Text == "" && m.HTML == "" {
		return &ValidationError{Field: "body", Reason: "neither text nor html is set"}
	}
	if reason := bodyProblem(m.Text); reason != "" {
		return &ValidationError{Field: "text", Reason: reason}
	}
	if reason := bodyProblem(m.HTML); reason != "" {
		return &ValidationError{Field: "html", Reason: reason}
	}
	if len(m.Headers) > MaxHeaders {
		return &ValidationError{Field: "headers", Reason: fmt.Sprintf("%d extra headers, at most %d allowed", len(m.Headers), MaxHeaders)}
	}
	seen := make(map[string]bool, len(m.Headers))
	for i, h := range m.Headers {
		field := "headers[" + strconv.Itoa(i) + "]"
		key := strings.ToLower(h.Name)
		if seen[key] {
			return &ValidationError{Field: field + ".name", Reason: fmt.Sprintf("%q is given twice; each extra header name may appear once", h.Name)}
		}
		seen[key] = true
		if reason := headerNameProblem(h.Name); reason != "" {
			return &ValidationError{Field: field + ".name", Reason: reason}
		}
		if ReservedHeader(h.Name) {
			return &ValidationError{Field: field + ".name", Reason: fmt.Sprintf("%q is set by the transport and cannot be an extra header", h.Name)}
		}
		if reason := headerValueProblem(h.Value); reason != "" {
			return &ValidationError{Field: field + ".value", Reason: reason}
		}
	}
	if n := m.Size(); n > MaxMessageSize {
		return &ValidationError{Field: "message", Reason: fmt.Sprintf("size %d bytes is over the limit of %d", n, MaxMessageSize)}
	}
	return m.validateAttachments()
}

func validateAddress(field string, a mail.Address, required bool) error {
	if a.Address == "" {
		if a.Name != "" {
			return &ValidationError{Field: field + ".address", Reason: "is empty but a name is set"}
		}
		if required {
			return &ValidationError{Field: field + ".address", Reason: "is empty"}
		}
		return nil
	}
	if reason := headerValueProblem(a.Name); reason != "" {
		return &ValidationError{Field: field + ".name", Reason: reason}
	}
	if reason := bidiProblem(a.Name); reason != "" {
		return &ValidationError{Field: field + ".name", Reason: reason}
	}
	if reason := bidiProblem(a.Address); reason != "" {
		return &ValidationError{Field: field + ".address", Reason: reason}
	}
	if reason := formatCharProblem(a.Address); reason != "" {
		return &ValidationError{Field: field + ".address", Reason: reason}
	}
	if len(a.Address) > MaxAddressLength {
		return &ValidationError{Field: field + ".address", Reason: fmt.Sprintf("is %d bytes long, at most %d allowed", len(a.Address), MaxAddressLength)}
	}
	if strings.ContainsAny(a.Address, "\r\n\x00<>") {
		return &ValidationError{Field: field + ".address", Reason: "contains CR, LF, NUL or angle brackets"}
	}
	if !dotAtomAddress(a.Address) {
		parsed, err := mail.ParseAddress(a.Address)
		if err != nil || parsed.Name != "" || parsed.Address != a.Address {
			return &ValidationError{Field: field + ".address", Reason: fmt.Sprintf("%q is not a plain address like user@example.com", a.Address)}
		}
	}
	if reason := domainProblem(a.Address[strings.LastIndexByte(a.Address, '@')+1:]); reason != "" {
		return &ValidationError{Field: field + ".address", Reason: fmt.Sprintf("%q: %s", a.Address, reason)}
	}
	return nil
}

// dotAtomAddress reports whether s is local@domain in the plainest form: a
// local part of dot-separated runs of the characters RFC 5322 allows in an
// atom, and a domain of dot-separated runs of ASCII letters, digits and
// hyphens. Such an address is one net/mail parses back to itself, which the
// fuzz test checks; Validate asks the parser only about the others (quoted
// local parts, address literals, anything unusual), which is most of the
// cost of validating a message.
func dotAtomAddress(s string) bool {
	at := strings.IndexByte(s, '@')
	if at <= 0 || at == len(s)-1 {
		return false
	}
	return dotRuns(s[:at], isAtext) && dotRuns(s[at+1:], isLetDigHyp)
}

// dotRuns reports whether s is one or more non-empty runs of bytes that ok
// accepts, separated by single dots.
func dotRuns(s string, ok func(byte) bool) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.':
			if run == 0 {
				return false
			}
			run = 0
		case ok(c):
			run++
		default:
			return false
		}
	}
	return run > 0
}

// isAtext: RFC 5322 atext, ASCII only.
func isAtext(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		strings.IndexByte("!#$%&'*+-/=?^_`{|}~", c) >= 0
}

func isLetDigHyp(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-'
}

// bidiProblem describes the bidirectional-control character in s, or
// returns "". Embeddings, overrides and isolates (U+202A-U+202E,
// U+2066-U+2069) can make an address or name display as something else
// than it is ("Trojan Source").
func bidiProblem(s string) string {
	for _, r := range s {
		if r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069 {
			return fmt.Sprintf("contains the bidirectional control character %U", r)
		}
	}
	return ""
}

// formatCharProblem describes the first format character (Unicode
// category Cf: zero-width space and joiners, soft hyphen, byte-order mark,
// ...) in an address, or returns "". It is invisible, so the address looks
// like another one, and mail systems that strip it deliver it to that one:
// a recipient limit or a suppression would see two mailboxes.
func formatCharProblem(s string) string {
	for _, r := range s {
		if unicode.Is(unicode.Cf, r) {
			return fmt.Sprintf("contains the invisible format character %U", r)
		}
	}
	return ""
}

// domainProblem describes why the domain of an address is not a host name,
// or returns "": each dot-separated label must be 1 to 63 bytes and must not
// start or end with a hyphen (RFC 1035 2.3.1, RFC 5890 2.3.1). An address
// literal ("[192.0.2.1]") is left to the address parser.
func domainProblem(domain string) string {
	if strings.HasPrefix(domain, "[") {
		return ""
	}
	if len(domain) > 253 {
		return fmt.Sprintf("the domain is %d bytes long, at most 253 allowed", len(domain))
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(domain, "."), ".") {
		switch {
		case label == "":
			return "the domain has an empty label"
		case len(label) > 63:
			return fmt.Sprintf("the domain label %.20q... is %d bytes long, at most 63 allowed", label, len(label))
		case strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-"):
			return fmt.Sprintf("the domain label %q starts or ends with a hyphen", label)
		}
	}
	return ""
}

// headerValueProblem describes why s cannot be a header value, or returns "".
// bodyProblem describes why s cannot be a text or HTML body, or returns
// "": invalid UTF-8, or a NUL, which no mail body holds and PostgreSQL's
// text refuses (and a refused INSERT aborts the application's whole
// transaction there).
func bodyProblem(s string) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "contains NUL"
	}
	return ""
}

func headerValueProblem(s string) string {
	if strings.ContainsAny(s, "\r\n\x00") {
		return "contains CR, LF or NUL"
	}
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	if len(s) > MaxLineLength {
		return fmt.Sprintf("is %d bytes long, at most %d allowed", len(s), MaxLineLength)
	}
	return ""
}

// headerNameProblem describes why s cannot be a header field name
// (RFC 5322 3.6.8: printable ASCII except colon), or returns "".
func headerNameProblem(s string) string {
	if s == "" {
		return "is empty"
	}
	if len(s) > 76 {
		return "is longer than 76 bytes"
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 33 || c > 126 || c == ':' {
			return fmt.Sprintf("%q contains a character not allowed in a header name", s)
		}
	}
	return ""
}

func messageIDProblem(s string) string {
	if len(s) > 250 {
		return "is longer than 250 bytes"
	}
	at := strings.LastIndexByte(s, '@')
	if at <= 0 || at == len(s)-1 {
		return fmt.Sprintf("%q is not of the form id@domain", s)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 33 || c > 126 || c == '<' || c == '>' || c == '"' || c == '\\' {
			return fmt.Sprintf("%q contains a character not allowed in a Message-ID (give it without angle brackets)", s)
		}
	}
	return ""
}

// NewMessageID returns a fresh random Message-ID value ("hex@domain", no
// angle brackets) for a mail sent from the given address; it falls back to
// "mailspool.invalid" when from has no domain.
func NewMessageID(from string) string {
	domain := "mailspool.invalid"
	if at := strings.LastIndexByte(from, '@'); at >= 0 && at < len(from)-1 {
		domain = from[at+1:]
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:]) + "@" + domain
}

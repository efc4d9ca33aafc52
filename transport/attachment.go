package transport

import (
	"fmt"
	"mime"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits on attachments, enforced by [Message.Validate].
const (
	// MaxAttachments bounds the number of attachments of a message.
	MaxAttachments = 100
	// MaxEncodedSize bounds [Message.EncodedSize], whatever the lane: the
	// largest limit of a provider mailspool ships an adapter for (Amazon
	// SES v2 takes 40 MB), with room for an SMTP server that takes more.
	MaxEncodedSize = 64 << 20
	// MaxFilenameLength bounds an attachment's file name, in bytes.
	MaxFilenameLength = 255
)

// Attachment is a file sent with a mail. Data is the file's content as it
// is (adapters encode it); what the queue stores is what is sent.
//
// An inline attachment is shown inside the HTML body, which references it
// as cid:ContentID (<img src="cid:logo@example.com">); Validate requires
// every cid: the HTML references to have an inline part and every inline
// part to be referenced. A ContentID belongs to inline parts only.
type Attachment struct {
	// Filename is the file's name as the recipient sees it, UTF-8, without
	// a directory. Names that are not ASCII are written per RFC 2231
	// (filename*=UTF-8''...).
	Filename string
	// ContentType is the media type ("application/pdf", "image/png",
	// parameters allowed). Empty means application/octet-stream to an
	// adapter; the queue fills it in at enqueue from the content (package
	// attachment sniffs it).
	ContentType string
	// Data is the file's content.
	Data []byte
	// Inline shows the file inside the HTML body instead of as an
	// attachment; it needs a ContentID.
	Inline bool
	// ContentID is the Content-ID of an inline part, without angle
	// brackets ("logo@example.com" or "logo"); the HTML refers to it as
	// cid:logo@example.com.
	ContentID string
}

// ContentTypeOrDefault returns a.ContentType, or application/octet-stream
// when it is empty.
func (a *Attachment) ContentTypeOrDefault() string {
	if a.ContentType == "" {
		return "application/octet-stream"
	}
	return a.ContentType
}

// attachmentHeaderSize is what [Message.EncodedSize] counts for the MIME
// header and boundary of one part, besides its file name.
const attachmentHeaderSize = 300

// EncodedSize is the size in bytes of m once encoded as MIME: its header,
// its bodies in quoted-printable, and each attachment in base64 with its
// line breaks and part header. It is an upper estimate within a few hundred
// bytes of what an adapter writes; the lane's size limit and the
// providers' limits (Amazon SES v2: 40 MB, SendGrid: 30 MB) are on this
// size, not on the size of the files.
func (m *Message) EncodedSize() int {
	n := 1024 // fixed header fields, boundaries, the MIME structure
	n += 3 * (len(m.Subject) + len(m.From.Name) + len(m.To.Name) + len(m.ReplyTo.Name))
	for _, h := range m.Headers {
		n += len(h.Name) + 3*len(h.Value) + 4
	}
	n += qpSize(m.Text) + qpSize(m.HTML)
	for i := range m.Attachments {
		a := &m.Attachments[i]
		n += attachmentHeaderSize + 2*3*len(a.Filename) + len(a.ContentType) + len(a.ContentID) + Base64Size(len(a.Data))
	}
	return n
}

// Base64Size is the length of n bytes in base64 as MIME writes it: lines
// of 76 characters, each ended by CRLF.
func Base64Size(n int) int {
	chars := (n + 2) / 3 * 4
	return chars + 2*((chars+75)/76)
}

// qpSize bounds the length of s in quoted-printable: 3 bytes for each byte
// that must be escaped, 2 for a line feed, and a soft line break every 73
// characters.
func qpSize(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		n += int(qpWidth[s[i]])
	}
	return n + 3*(n/73+1)
}

// qpWidth is each byte's length in quoted-printable: 1 for a printable
// ASCII character other than '=' and for a tab, 2 for a line feed (written
// as CRLF), 3 (=XX) for the others. A table, because a byte's test of
// three ranges was most of a typical mail's Validate.
var qpWidth = func() (w [256]uint8) {
	for c := range w {
		switch {
		case c == '\n':
			w[c] = 2
		case c == '\t' || (c >= ' ' && c <= '~' && c != '='):
			w[c] = 1
		default:
			w[c] = 3
		}
	}
	return w
}()

// validateAttachments checks m's attachments and the cid: references of
// its HTML body; the caller has checked the rest of m.
func (m *Message) validateAttachments() error {
	if len(m.Attachments) > MaxAttachments {
		return &ValidationError{Field: "attachments", Reason: fmt.Sprintf("%d attachments, at most %d allowed", len(m.Attachments), MaxAttachments)}
	}
	ids := make(map[string]int, len(m.Attachments))
	for i := range m.Attachments {
		a := &m.Attachments[i]
		field := "attachments[" + strconv.Itoa(i) + "]"
		if reason := filenameProblem(a.Filename); reason != "" {
			return &ValidationError{Field: field + ".filename", Reason: reason}
		}
		if a.ContentType != "" {
			if reason := contentTypeProblem(a.ContentType); reason != "" {
				return &ValidationError{Field: field + ".content_type", Reason: reason}
			}
		}
		if len(a.Data) == 0 {
			return &ValidationError{Field: field + ".data", Reason: fmt.Sprintf("%q is empty", a.Filename)}
		}
		switch {
		case a.Inline && a.ContentID == "":
			return &ValidationError{Field: field + ".content_id", Reason: fmt.Sprintf("inline part %q has no content ID (the HTML refers to it as cid:ID)", a.Filename)}
		case !a.Inline && a.ContentID != "":
			return &ValidationError{Field: field + ".content_id", Reason: fmt.Sprintf("%q has a content ID but is not inline; only inline parts are referenced by cid:", a.Filename)}
		case a.Inline:
			if reason := contentIDProblem(a.ContentID); reason != "" {
				return &ValidationError{Field: field + ".content_id", Reason: reason}
			}
			if j, dup := ids[a.ContentID]; dup {
				return &ValidationError{Field: field + ".content_id", Reason: fmt.Sprintf("%q is also the content ID of attachments[%d]", a.ContentID, j)}
			}
			ids[a.ContentID] = i
		}
	}
	refs := CIDReferences(m.HTML)
	for _, id := range refs {
		if _, ok := ids[id]; !ok {
			return &ValidationError{Field: "html", Reason: fmt.Sprintf("refers to cid:%s, but no inline attachment has that content ID", id)}
		}
		delete(ids, id)
	}
	for i := range m.Attachments {
		if a := &m.Attachments[i]; a.Inline {
			if _, unreferenced := ids[a.ContentID]; unreferenced {
				return &ValidationError{Field: "attachments[" + strconv.Itoa(i) + "].content_id", Reason: fmt.Sprintf("inline part %q (cid:%s) is not referenced by the HTML body", a.Filename, a.ContentID)}
			}
		}
	}
	if n := m.EncodedSize(); n > MaxEncodedSize {
		return &ValidationError{Field: "message", Reason: fmt.Sprintf("encoded size %d bytes is over the limit of %d", n, MaxEncodedSize)}
	}
	return nil
}

// CIDReferences returns the content IDs that html refers to as cid:ID URLs
// (RFC 2392; percent-escapes decoded), each once, in order of first use.
// A reference ends at a quote, an apostrophe, a parenthesis, a space, or
// an angle bracket.
func CIDReferences(html string) []string {
	var ids []string
	seen := map[string]bool{}
	rest := html
	for {
		i := indexFold(rest, "cid:")
		if i < 0 {
			return ids
		}
		if i > 0 && isURLChar(rest[i-1]) {
			rest = rest[i+4:] // part of a longer word ("acid:")
			continue
		}
		rest = rest[i+4:]
		end := strings.IndexFunc(rest, func(r rune) bool {
			return r == '"' || r == '\'' || r == ')' || r == '(' || r == '<' || r == '>' || r == ' ' || r == '\t' || r == '\r' || r == '\n' || r == '&'
		})
		if end < 0 {
			end = len(rest)
		}
		raw := rest[:end]
		rest = rest[end:]
		if raw == "" {
			continue
		}
		id, err := url.PathUnescape(raw)
		if err != nil {
			id = raw
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
}

func isURLChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.'
}

// indexFold is strings.Index of an ASCII lower-case needle that begins
// with a letter, ignoring the case of s. Only a byte that is the needle's
// first letter in either case (b|0x20 is that letter for those two bytes
// alone) starts a comparison.
func indexFold(s, needle string) int {
	for i := 0; i+len(needle) <= len(s); i++ {
		if s[i]|0x20 == needle[0] && strings.EqualFold(s[i:i+len(needle)], needle) {
			return i
		}
	}
	return -1
}

func filenameProblem(s string) string {
	switch {
	case s == "":
		return "is empty"
	case len(s) > MaxFilenameLength:
		return fmt.Sprintf("is %d bytes long, at most %d allowed", len(s), MaxFilenameLength)
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.ContainsAny(s, `/\`):
		return fmt.Sprintf("%q contains a directory separator; give the file's name only", s)
	}
	for _, r := range s {
		if r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Sprintf("%q contains a control character", s)
		}
	}
	if reason := bidiProblem(s); reason != "" {
		return reason
	}
	return ""
}

func contentTypeProblem(s string) string {
	if strings.ContainsAny(s, "\r\n\x00") || len(s) > 255 {
		return fmt.Sprintf("%.40q contains CR, LF or NUL or is longer than 255 bytes", s)
	}
	t, _, err := mime.ParseMediaType(s)
	if err != nil || !strings.Contains(t, "/") {
		return fmt.Sprintf("%q is not a media type of the form type/subtype", s)
	}
	if strings.HasPrefix(t, "multipart/") {
		return fmt.Sprintf("%q: an attachment cannot be a multipart", s)
	}
	return ""
}

// contentIDProblem: a Content-ID is an id-left@id-right or a bare token of
// printable ASCII without specials, so that it is written as <ID> and
// referenced as cid:ID unchanged.
func contentIDProblem(s string) string {
	if len(s) > 250 {
		return "is longer than 250 bytes"
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' || strings.IndexByte(`<>"\()[],;:%`, c) >= 0 {
			return fmt.Sprintf("%q contains a character not allowed in a content ID (give it without angle brackets; letters, digits and !#$&'*+-./=?@^_`{|}~)", s)
		}
	}
	return ""
}

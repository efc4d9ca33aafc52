package transport

import (
	"fmt"
	"mime"
	"net/mail"
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

// EncodedSize is the size in bytes of m once encoded as MIME: its header,
// its bodies in quoted-printable, and each attachment in base64 with its
// line breaks and part header. It is an upper bound on what the adapters
// that write MIME send (SMTP, Amazon SES), with the addresses as they are
// or with their domains as A-labels (no SMTPUTF8): it counts header values
// and display names as the RFC 2047 encoded words and folds they become,
// file names with their RFC 2231 continuations, and each body line as a
// quoted-printable writer escapes and breaks it. It is above what is
// written by some 10 to 30 bytes for a plain mail; by up to a few per cent
// of the long header values that are encoded or folded and of the long
// file names; and by up to about 250 bytes for each address whose domain
// is not ASCII, counted as long as its A-label form may be. The lane's
// size limit and the providers' limits (Amazon SES v2: 40 MB, SendGrid:
// 30 MB) are on this size, not on the size of the files.
func (m *Message) EncodedSize() int {
	// Date, MIME-Version and the Message-ID's field, and a line end the
	// SMTP adapter adds when the last line is unfinished.
	n := 39 + 19 + 18 + 2
	if m.MessageID != "" {
		n += len(m.MessageID)
	} else {
		n += 33 + max(domainSize(m.From.Address), len("mailspool.invalid")) // NewMessageID
	}
	n += headerFieldSize(len("Subject"), m.Subject)
	for _, h := range m.Headers {
		n += headerFieldSize(len(h.Name), h.Value)
	}
	n += addressFieldSize(len("From"), m.From) + addressFieldSize(len("To"), m.To)
	if m.ReplyTo.Address != "" {
		n += addressFieldSize(len("Reply-To"), m.ReplyTo)
	}
	// The body: one text part with its Content-Type and
	// Content-Transfer-Encoding, or multipart/alternative with two.
	if m.Text != "" && m.HTML != "" {
		n += 485
	} else {
		n += 88
	}
	n += qpSize(m.Text) + qpSize(m.HTML)
	if len(m.Attachments) == 0 {
		return n
	}
	// The body as a part of its own; multipart/mixed around the
	// attachments, multipart/related around the inline parts.
	n += 64
	var inline, attached bool
	for i := range m.Attachments {
		a := &m.Attachments[i]
		n += attachmentSize(a)
		inline = inline || a.Inline
		attached = attached || !a.Inline
	}
	if attached {
		n += 174
	}
	if inline {
		n += 176
		if attached {
			n += 64 // as a part of multipart/mixed
		}
	}
	return n
}

// attachmentSize bounds a's MIME part: its delimiter line, its
// Content-Disposition (with the file name), Content-Id when inline,
// Content-Transfer-Encoding and Content-Type (with the name again), and
// its bytes in base64.
func attachmentSize(a *Attachment) int {
	n := 154 // delimiter, field names, "attachment;", line ends
	if a.Inline {
		n += 12 + len(a.ContentID) // "inline;" is 4 shorter; "Content-Id: <>\r\n"
	}
	if a.ContentType == "" {
		n += len("application/octet-stream")
	} else {
		n += len(a.ContentType)
	}
	return n + paramSize(len("filename"), a.Filename) + paramSize(len("name"), a.Filename) + Base64Size(len(a.Data))
}

// paramSize bounds a MIME parameter attr=value on its own folded line, as
// the MIME writer puts it: attr="value" for a short printable ASCII value,
// else RFC 2231's percent-encoded form (attr*=UTF-8, two apostrophes and
// the escapes), split into continuations (attr*0*=, attr*1*=, ...) of at
// least 48 characters but the last.
func paramSize(attr int, value string) int {
	enc, plain := 0, true
	for i := 0; i < len(value); i++ {
		c := paramClass[value[i]]
		enc += int(c & 3)
		plain = plain && c&paramQuoted == 0
	}
	if plain && attr+len(value) < 70 {
		return 6 + attr + len(value) // CRLF, space, =, quotes
	}
	// CRLF, space, "*N*=", ";" for each piece, "UTF-8''" once.
	return enc + 7 + (enc/48+1)*(9+attr)
}

// headerFieldSize bounds a header field as go-mail writes it: the value
// as it is when it is printable ASCII (tabs allowed), otherwise as RFC
// 2047 Q-encoded words of at most 75 characters, separated by spaces; and
// a fold (CRLF before a space) wherever the line would pass 76.
func headerFieldSize(name int, value string) int {
	n := name + 4 // ": " and CRLF
	q, flags := scanHeader(value)
	if flags&hdrEncode == 0 {
		return n + len(value) + 2*maxFolds(len(value))
	}
	// Each word costs =?UTF-8?q?, ?=, the space before the next and a fold.
	return n + q + 15*qWords(q, flags)
}

// addressFieldSize bounds the From, To or Reply-To field for a, as
// net/mail formats the address (String) and go-mail folds it: the display
// name quoted, or RFC 2047 encoded (B when it holds a special character,
// else Q), and the address in angle brackets, its local part quoted unless
// it is a dot-atom and its domain as the longer of its U-label and
// A-label forms.
func addressFieldSize(name int, a mail.Address) int {
	local := a.Address[:max(strings.LastIndexByte(a.Address, '@'), 0)]
	v := 3 + domainSize(a.Address) // <, @, >
	if dotRuns(local, isAtext) {
		v += len(local)
	} else {
		v += 2*len(local) + 2
	}
	folds := maxFolds(v + 1)
	if a.Name != "" {
		n := len(a.Name)
		q, flags := scanHeader(a.Name)
		switch {
		case flags&hdrEncode == 0: // quoted, and a space
			v += n + escapes(a.Name) + 3
			folds = maxFolds(v)
		case flags&hdrSpecial != 0:
			// Words of 42 to 45 bytes, 4 characters for each 3 or fewer.
			words := n/42 + 1
			v += (4*n+2)/3 + 16*words
			folds += words
		default:
			words := qWords(q, flags)
			v += q + 13*words + 1
			folds += words
		}
	}
	return name + 4 + v + 2*folds
}

// qWords bounds the number of RFC 2047 encoded words that hold q
// characters of Q-encoding: the encoder starts a new word when the next
// character (=XX for each of its bytes) would pass 63, so each word but
// the last holds 64 less the longest character's length.
func qWords(q int, flags uint8) int {
	switch {
	case flags&hdrLead4 != 0:
		return q/52 + 1
	case flags&hdrLead3 != 0:
		return q/55 + 1
	}
	return q/58 + 1
}

// domainSize bounds the length of the domain of addr as an adapter writes
// it: as it is, or, when it is not ASCII, as A-labels (render.ASCII, for a
// server without SMTPUTF8 and for Amazon SES), which can be several times
// longer but must still make an address of at most MaxAddressLength bytes
// to be written at all.
func domainSize(addr string) int {
	at := strings.LastIndexByte(addr, '@')
	d := addr[at+1:]
	for i := 0; i < len(d); i++ {
		if d[i] >= utf8.RuneSelf {
			return max(len(d), MaxAddressLength-1-max(at, 0))
		}
	}
	return len(d)
}

// maxFolds bounds the folds go-mail's header writer makes in a value of n
// bytes: it folds before a word that would pass the line's 76 characters,
// so two lines after a fold hold at least 72 bytes of the value between
// them.
func maxFolds(n int) int { return 2*((n+1)/72) + 1 }

// scanHeader returns the length of s in RFC 2047 Q-encoding (without the
// delimiters) and the union of hdrClass's flags of its bytes.
func scanHeader(s string) (q int, flags uint8) {
	for i := 0; i < len(s); i++ {
		c := hdrClass[s[i]]
		q += int(c & 3)
		flags |= c
	}
	return q, flags
}

// escapes counts the bytes of s that a quoted string escapes.
func escapes(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			n++
		}
	}
	return n
}

// Flags of hdrClass: hdrEncode is a byte that makes a header value or
// display name go out RFC 2047 encoded (a control character other than
// tab, or not ASCII); hdrLead3 and hdrLead4 begin a UTF-8 sequence of 3
// and 4 bytes or more; hdrSpecial is a character that makes net/mail
// encode a display name in B rather than Q.
const (
	hdrEncode  = 4
	hdrLead3   = 8
	hdrLead4   = 16
	hdrSpecial = 32
)

// hdrClass is each byte's length in Q-encoding (1, or 3 for =XX), with
// the flags above.
var hdrClass = func() (t [256]uint8) {
	for c := range t {
		switch {
		case c >= ' ' && c <= '~' && c != '=' && c != '?' && c != '_':
			t[c] = 1
		default:
			t[c] = 3
		}
		if c < ' ' && c != '\t' || c > '~' {
			t[c] |= hdrEncode
		}
		if c >= 0xe0 {
			t[c] |= hdrLead3
		}
		if c >= 0xf0 {
			t[c] |= hdrLead4
		}
		if strings.IndexByte(`"#$%&'(),.:;<>@[]^`+"`{|}~", byte(c)) >= 0 {
			t[c] |= hdrSpecial
		}
	}
	return t
}()

// paramQuoted flags a byte that a quoted parameter value cannot hold as
// it is.
const paramQuoted = 4

// paramClass is each byte's length in RFC 2231 percent-encoding (1 for an
// attribute-char, 3 for %XX), with paramQuoted.
var paramClass = func() (t [256]uint8) {
	for c := range t {
		t[c] = 3
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$&+-.^_`|~", byte(c)) >= 0 {
			t[c] = 1
		}
		if c < ' ' || c > '~' || c == '"' || c == '\\' {
			t[c] |= paramQuoted
		}
	}
	return t
}()

// Base64Size is the length of n bytes in base64 as MIME writes it: lines
// of 76 characters, each ended by CRLF.
func Base64Size(n int) int {
	chars := (n + 2) / 3 * 4
	return chars + 2*((chars+75)/76)
}

// qpSize bounds the length of s in quoted-printable as mime/quotedprintable
// writes it, line by line: each byte's width (qpWidth), 2 more for a space
// or tab at the end of a line (written =20 or =09), a CRLF for each line
// break (LF, CR or CRLF), and on a line longer than 75 characters a soft
// line break (=, CRLF) for each 73 characters (a line breaks at 75, or
// before an =XX that would pass it).
func qpSize(s string) int {
	n := 0
	cr := strings.IndexByte(s, '\r') >= 0
	for {
		end := strings.IndexByte(s, '\n')
		if cr {
			lim := len(s)
			if end >= 0 {
				lim = end
			}
			if i := strings.IndexByte(s[:lim], '\r'); i >= 0 {
				end = i
			}
		}
		line := s
		if end >= 0 {
			line = s[:end]
		}
		w := 0
		for i := 0; i < len(line); i++ {
			w += int(qpWidth[line[i]])
		}
		if k := len(line) - 1; k >= 0 && (line[k] == ' ' || line[k] == '\t') {
			w += 2
		}
		if w > 75 {
			w += 3 * ((w - 1) / 73)
		}
		n += w
		if end < 0 {
			return n
		}
		n += 2
		if s[end] == '\r' && end+1 < len(s) && s[end+1] == '\n' {
			end++
		}
		s = s[end+1:]
	}
}

// qpWidth is each byte's length on a line of quoted-printable: 1 for a
// printable ASCII character other than '=' and for a space or tab, 3 (=XX)
// for the others. A table, because a byte's test of three ranges was most
// of a typical mail's Validate. Line breaks are not on a line; qpSize
// counts them.
var qpWidth = func() (w [256]uint8) {
	for c := range w {
		switch {
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

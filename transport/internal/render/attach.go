package render

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/textproto"
	"strings"

	"github.com/wneessen/go-mail"

	"github.com/mailspool/mailspool/transport"
)

// Mail is a message ready to write: the go-mail message that carries its
// envelope, header and bodies, and m's attachments, which Mail writes
// itself.
//
// Why not go-mail's attachments: go-mail v0.8.1 writes a non-ASCII file
// name as an RFC 2047 encoded word inside the filename parameter, which
// RFC 2047 (section 5) forbids and several clients show as is; and it
// encodes each file into a buffer before writing it, a second copy of every
// attachment in memory. Mail writes names per RFC 2231 and streams base64
// from the attachment's bytes.
type Mail struct {
	Msg         *mail.Msg
	attachments []transport.Attachment
}

// Render validates m and returns the Mail for it: [Msg]'s message and, when
// m has attachments, a MIME structure around it:
//
//	multipart/mixed            (when m has attachments that are not inline)
//	  multipart/related        (when m has inline parts)
//	    the body Msg writes    (text/plain, text/html or multipart/alternative)
//	    inline parts           (Content-Disposition: inline, Content-ID)
//	  attachments              (Content-Disposition: attachment)
func Render(m *transport.Message) (*Mail, error) {
	msg, err := Msg(m)
	if err != nil {
		return nil, err
	}
	return &Mail{Msg: msg, attachments: m.Attachments}, nil
}

// WriteTo writes the whole message, CRLF line endings.
func (r *Mail) WriteTo(w io.Writer) (int64, error) {
	if len(r.attachments) == 0 {
		return r.Msg.WriteTo(w)
	}
	cw := &countWriter{w: w}
	err := r.write(cw)
	return cw.n, err
}

// MIME returns the bytes WriteTo writes.
func (r *Mail) MIME() ([]byte, error) {
	var buf bytes.Buffer
	if _, err := r.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("render: write mime: %w", err)
	}
	return buf.Bytes(), nil
}

func (r *Mail) write(w io.Writer) error {
	// The message without attachments, as go-mail writes it, is split into
	// its header and its body: the header's Content-Type and
	// Content-Transfer-Encoding go to the body's part, the rest stays.
	var plain bytes.Buffer
	if _, err := r.Msg.WriteTo(&plain); err != nil {
		return err
	}
	head, body, ok := bytes.Cut(plain.Bytes(), []byte("\r\n\r\n"))
	if !ok {
		return errors.New("render: the message has no header")
	}
	top, bodyHeader := splitHeader(string(head))

	var inline, attached []*transport.Attachment
	for i := range r.attachments {
		if a := &r.attachments[i]; a.Inline {
			inline = append(inline, a)
		} else {
			attached = append(attached, a)
		}
	}
	bw := bufio.NewWriterSize(w, 32<<10)
	if _, err := bw.WriteString(top); err != nil {
		return err
	}
	// outer is multipart/mixed when there are attachments; related is
	// multipart/related when there are inline parts, inside outer when
	// both are.
	var outer, related *multipart.Writer
	if len(attached) > 0 {
		outer = multipart.NewWriter(bw)
		if _, err := fmt.Fprintf(bw, "Content-Type: multipart/mixed;\r\n boundary=%s\r\n\r\n", outer.Boundary()); err != nil {
			return err
		}
	}
	if len(inline) > 0 {
		boundary := multipart.NewWriter(io.Discard).Boundary()
		contentType := "multipart/related;\r\n boundary=" + boundary
		var parent io.Writer = bw
		if outer != nil {
			pw, err := outer.CreatePart(textproto.MIMEHeader{"Content-Type": {contentType}})
			if err != nil {
				return err
			}
			parent = pw
		} else if _, err := fmt.Fprintf(bw, "Content-Type: %s\r\n\r\n", contentType); err != nil {
			return err
		}
		related = multipart.NewWriter(parent)
		if err := related.SetBoundary(boundary); err != nil {
			return err
		}
	}
	inner := outer
	if related != nil {
		inner = related
	}
	if err := writeBodyPart(inner, bodyHeader, body); err != nil {
		return err
	}
	for _, a := range inline {
		if err := writeAttachment(related, a); err != nil {
			return err
		}
	}
	if related != nil {
		if err := related.Close(); err != nil {
			return err
		}
	}
	for _, a := range attached {
		if err := writeAttachment(outer, a); err != nil {
			return err
		}
	}
	if outer != nil {
		if err := outer.Close(); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// splitHeader splits a header block (fields separated by CRLF, folded
// lines starting with a space or tab) into the top-level fields, as text
// ending in CRLF, and the body's Content-Type and
// Content-Transfer-Encoding, unfolded.
func splitHeader(head string) (string, textproto.MIMEHeader) {
	var top strings.Builder
	part := textproto.MIMEHeader{}
	var fields []string
	for _, line := range strings.Split(head, "\r\n") {
		if (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")) && len(fields) > 0 {
			fields[len(fields)-1] += "\r\n" + line
			continue
		}
		fields = append(fields, line)
	}
	for _, f := range fields {
		name, value, _ := strings.Cut(f, ":")
		switch textproto.CanonicalMIMEHeaderKey(name) {
		case "Content-Type", "Content-Transfer-Encoding":
			value = strings.Join(strings.Fields(strings.ReplaceAll(value, "\r\n", " ")), " ")
			part.Set(name, value)
		default:
			top.WriteString(f)
			top.WriteString("\r\n")
		}
	}
	return top.String(), part
}

func writeBodyPart(w *multipart.Writer, header textproto.MIMEHeader, body []byte) error {
	pw, err := w.CreatePart(header)
	if err != nil {
		return err
	}
	_, err = pw.Write(body)
	return err
}

// writeAttachment writes a as a part of w: its Content-Type with the name,
// its Content-Disposition with the file name (RFC 2231 when not ASCII),
// its Content-ID when inline, and its bytes in base64, streamed.
func writeAttachment(w *multipart.Writer, a *transport.Attachment) error {
	h := textproto.MIMEHeader{}
	h.Set("Content-Type", a.ContentTypeOrDefault()+";"+Param("name", a.Filename))
	disposition := "attachment"
	if a.Inline {
		disposition = "inline"
		h.Set("Content-Id", "<"+a.ContentID+">")
	}
	h.Set("Content-Disposition", disposition+";"+Param("filename", a.Filename))
	h.Set("Content-Transfer-Encoding", "base64")
	pw, err := w.CreatePart(h)
	if err != nil {
		return err
	}
	lw := &lineWriter{w: pw}
	enc := base64.NewEncoder(base64.StdEncoding, lw)
	if _, err := enc.Write(a.Data); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	return lw.close()
}

// Param returns a MIME parameter attr=value to follow a ";" in a header
// field, folded onto lines of its own: attr="value" when value is
// printable ASCII, and otherwise RFC 2231's attr*=UTF-8”percent-encoded
// form, split into numbered continuations (attr*0*=, attr*1*=, ...) of at
// most 50 characters. It never writes an RFC 2047 encoded word, which a
// parameter may not hold (RFC 2047, section 5).
func Param(attr, value string) string {
	if plainParam(value) && len(attr)+len(value) < 70 {
		return "\r\n " + attr + `="` + value + `"`
	}
	enc := pct(value)
	if len(enc) <= 60 {
		return "\r\n " + attr + "*=UTF-8''" + enc
	}
	var b strings.Builder
	for i := 0; len(enc) > 0; i++ {
		n := min(50, len(enc))
		// Never split a %XX escape.
		if j := strings.LastIndexByte(enc[max(0, n-2):n], '%'); j >= 0 {
			n = max(0, n-2) + j
		}
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, "\r\n %s*%d*=", attr, i)
		if i == 0 {
			b.WriteString("UTF-8''")
		}
		b.WriteString(enc[:n])
		enc = enc[n:]
	}
	return b.String()
}

// plainParam: printable ASCII that a quoted-string holds without escapes.
func plainParam(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// pct percent-encodes every byte of s that is not an RFC 2231 attribute-char.
func pct(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$&+-.^_`|~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// lineWriter breaks base64 into lines of 76 characters ended by CRLF.
type lineWriter struct {
	w   io.Writer
	col int
}

func (l *lineWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(76-l.col, len(p))
		if _, err := l.w.Write(p[:k]); err != nil {
			return n, err
		}
		n += k
		l.col += k
		p = p[k:]
		if l.col == 76 {
			if _, err := io.WriteString(l.w, "\r\n"); err != nil {
				return n, err
			}
			l.col = 0
		}
	}
	return n, nil
}

func (l *lineWriter) close() error {
	if l.col == 0 {
		return nil
	}
	_, err := io.WriteString(l.w, "\r\n")
	return err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

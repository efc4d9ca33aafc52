package conformance

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"strings"

	"github.com/mailspool/mailspool/transport"
)

// maxMIMEDepth bounds how deeply multipart bodies may nest.
const maxMIMEDepth = 10

// ParseMIME decodes a raw RFC 5322 message, as an SMTP server or a provider
// API received it, into a Received:
//
//   - From and FromName come from the From header, To from every address in
//     the To header (a harness that knows the envelope recipients overwrites
//     it), ToName from the first To address;
//   - Subject and the values in Header have RFC 2047 encoded words decoded,
//     except address fields (From, To, Cc, Bcc, Reply-To, Sender), which
//     stay as received so [net/mail.ParseAddress] still reads them;
//   - Text and HTML are the first text/plain and text/html parts that are not
//     attachments, found anywhere in a tree of multipart/alternative, mixed
//     or related parts, with quoted-printable or base64 transfer encoding
//     undone and CRLF line endings turned into \n.
//
// Charsets other than UTF-8, US-ASCII and ISO-8859-1 are an error.
func ParseMIME(raw []byte) (Received, error) {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return Received{}, fmt.Errorf("conformance: parse mime: %w", err)
	}
	var r Received
	r.Header = make(textproto.MIMEHeader, len(msg.Header))
	for k, vs := range msg.Header {
		for _, v := range vs {
			if !addressFields[k] {
				v = decodeWords(v)
			}
			r.Header.Add(k, v)
		}
	}
	r.Subject = r.Header.Get("Subject")
	if msg.Header.Get("From") != "" {
		from, err := msg.Header.AddressList("From")
		if err != nil {
			return Received{}, fmt.Errorf("conformance: parse mime: From: %w", err)
		}
		r.From, r.FromName = from[0].Address, from[0].Name
	}
	if msg.Header.Get("To") != "" {
		to, err := msg.Header.AddressList("To")
		if err != nil {
			return Received{}, fmt.Errorf("conformance: parse mime: To: %w", err)
		}
		for _, a := range to {
			r.To = append(r.To, a.Address)
		}
		r.ToName = to[0].Name
	}
	if err := walkPart(&r, textproto.MIMEHeader(msg.Header), msg.Body, 0); err != nil {
		return Received{}, fmt.Errorf("conformance: parse mime: %w", err)
	}
	return r, nil
}

// walkPart collects the text and HTML bodies of one MIME entity (and of its
// children when it is a multipart).
func walkPart(r *Received, h textproto.MIMEHeader, body io.Reader, depth int) error {
	if depth > maxMIMEDepth {
		return errors.New("multipart nested too deeply")
	}
	mediaType, params := "text/plain", map[string]string{"charset": "us-ascii"}
	if ct := h.Get("Content-Type"); ct != "" {
		var err error
		if mediaType, params, err = mime.ParseMediaType(ct); err != nil {
			return fmt.Errorf("Content-Type %q: %w", ct, err)
		}
	}
	if strings.HasPrefix(mediaType, "multipart/") {
		boundary := params["boundary"]
		if boundary == "" {
			return fmt.Errorf("%s without a boundary", mediaType)
		}
		mr := multipart.NewReader(body, boundary)
		for {
			// NextRawPart leaves the transfer encoding to decodeBody, so
			// base64 and quoted-printable take the same path.
			p, err := mr.NextRawPart()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("%s: %w", mediaType, err)
			}
			if err := walkPart(r, p.Header, p, depth+1); err != nil {
				return err
			}
		}
	}
	if isAttachment(h) || filename(h) != "" || (mediaType != "text/plain" && mediaType != "text/html") {
		return readAttachment(r, h, mediaType, body)
	}
	var target *string
	switch mediaType {
	case "text/plain":
		target = &r.Text
	case "text/html":
		target = &r.HTML
	default:
		return nil
	}
	if *target != "" || isAttachment(h) {
		return nil
	}
	text, err := decodeBody(h.Get("Content-Transfer-Encoding"), params["charset"], body)
	if err != nil {
		return fmt.Errorf("%s part: %w", mediaType, err)
	}
	*target = text
	return nil
}

// readAttachment decodes a part that is a file into r.Attachments. A file
// name written as an RFC 2047 encoded word inside a parameter, which RFC
// 2047 (section 5) forbids, is an error: clients show it as it is.
func readAttachment(r *Received, h textproto.MIMEHeader, mediaType string, body io.Reader) error {
	for _, field := range []string{"Content-Type", "Content-Disposition"} {
		if strings.Contains(h.Get(field), "=?") {
			return fmt.Errorf("%s %q holds an RFC 2047 encoded word in a parameter (RFC 2231 is the way to write a name that is not ASCII)", field, h.Get(field))
		}
	}
	if enc := strings.ToLower(strings.TrimSpace(h.Get("Content-Transfer-Encoding"))); enc == "base64" {
		body = base64.NewDecoder(base64.StdEncoding, body)
	} else if enc == "quoted-printable" {
		body = quotedprintable.NewReader(body)
	}
	data, err := io.ReadAll(body)
	if err != nil {
		return fmt.Errorf("attachment %q: %w", filename(h), err)
	}
	d, _, _ := mime.ParseMediaType(h.Get("Content-Disposition"))
	r.Attachments = append(r.Attachments, transport.Attachment{
		Filename:    filename(h),
		ContentType: mediaType,
		Data:        data,
		Inline:      d == "inline",
		ContentID:   strings.TrimSuffix(strings.TrimPrefix(h.Get("Content-Id"), "<"), ">"),
	})
	return nil
}

// filename is the file name of a part: its Content-Disposition's filename
// parameter or else its Content-Type's name, RFC 2231 decoded.
func filename(h textproto.MIMEHeader) string {
	if _, p, err := mime.ParseMediaType(h.Get("Content-Disposition")); err == nil && p["filename"] != "" {
		return p["filename"]
	}
	if _, p, err := mime.ParseMediaType(h.Get("Content-Type")); err == nil {
		return p["name"]
	}
	return ""
}

func isAttachment(h textproto.MIMEHeader) bool {
	d, _, err := mime.ParseMediaType(h.Get("Content-Disposition"))
	return err == nil && d == "attachment"
}

// decodeBody undoes the transfer encoding and charset of a text part and
// normalises its line endings to \n.
func decodeBody(encoding, charset string, body io.Reader) (string, error) {
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "", "7bit", "8bit", "binary":
	case "quoted-printable":
		body = quotedprintable.NewReader(body)
	case "base64":
		// The decoder skips the CR and LF between encoded lines.
		body = base64.NewDecoder(base64.StdEncoding, body)
	default:
		return "", fmt.Errorf("unknown Content-Transfer-Encoding %q", encoding)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return "", fmt.Errorf("%s body: %w", encoding, err)
	}
	var s string
	switch strings.ToLower(charset) {
	case "", "utf-8", "utf8", "us-ascii":
		s = string(b)
	case "iso-8859-1", "latin1":
		r := make([]rune, len(b))
		for i, c := range b {
			r[i] = rune(c)
		}
		s = string(r)
	default:
		return "", fmt.Errorf("unsupported charset %q", charset)
	}
	return strings.ReplaceAll(s, "\r\n", "\n"), nil
}

// addressFields are the header fields ParseMIME leaves encoded: decoding
// them could turn a quoted display name into one that no longer parses.
var addressFields = map[string]bool{
	"From": true, "To": true, "Cc": true, "Bcc": true, "Reply-To": true, "Sender": true,
}

var wordDecoder mime.WordDecoder

// decodeWords decodes the RFC 2047 encoded words in a header value; a value
// that does not decode is returned as it is.
func decodeWords(v string) string {
	d, err := wordDecoder.DecodeHeader(v)
	if err != nil {
		return v
	}
	return d
}

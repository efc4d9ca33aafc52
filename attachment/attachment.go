// Package attachment fills in what the sender of an attachment may leave
// out, and reads attachments from files: the content type, sniffed from the
// bytes (github.com/gabriel-vasile/mimetype) when it is not given. The
// queue calls it at enqueue, so that what is stored is what is sent.
package attachment

import (
	"fmt"
	"mime"
	"os"
	"path/filepath"
	"strings"

	"github.com/gabriel-vasile/mimetype"

	"github.com/mailspool/mailspool/transport"
)

// ContentType returns the media type of data: sniffed from its first bytes,
// or, when the bytes say nothing more than application/octet-stream or
// plain text, the type registered for filename's extension if there is one.
func ContentType(data []byte, filename string) string {
	sniffed := mimetype.Detect(data)
	t := sniffed.String()
	if sniffed.Is("application/octet-stream") || sniffed.Is("text/plain") {
		if byExt := mime.TypeByExtension(strings.ToLower(filepath.Ext(filename))); byExt != "" {
			return byExt
		}
	}
	return t
}

// WithTypes returns m with the content type of each attachment that has
// none filled in by ContentType; m itself is not changed, and is returned
// as it is when every attachment has a type.
func WithTypes(m *transport.Message) *transport.Message {
	var out *transport.Message
	for i := range m.Attachments {
		if m.Attachments[i].ContentType != "" {
			continue
		}
		if out == nil {
			c := *m
			c.Attachments = append([]transport.Attachment(nil), m.Attachments...)
			out = &c
		}
		a := &out.Attachments[i]
		a.ContentType = ContentType(a.Data, a.Filename)
	}
	if out == nil {
		return m
	}
	return out
}

// ReadFile reads the file at path as an attachment named after the file's
// base name, of type contentType or, when that is empty, the sniffed one.
// A non-empty contentID makes it an inline part that the HTML body refers
// to as cid:contentID. At most limit bytes are read; a larger file is an
// error that says so.
func ReadFile(path, contentType, contentID string, limit int64) (transport.Attachment, error) {
	f, err := os.Open(path)
	if err != nil {
		return transport.Attachment{}, fmt.Errorf("attachment: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return transport.Attachment{}, fmt.Errorf("attachment: %w", err)
	}
	if !st.Mode().IsRegular() {
		return transport.Attachment{}, fmt.Errorf("attachment: %s is not a regular file", path)
	}
	if st.Size() > limit {
		return transport.Attachment{}, fmt.Errorf("attachment: %s is %d bytes, larger than the limit of %d", path, st.Size(), limit)
	}
	data := make([]byte, st.Size())
	if _, err := f.ReadAt(data, 0); err != nil && st.Size() > 0 {
		return transport.Attachment{}, fmt.Errorf("attachment: reading %s: %w", path, err)
	}
	a := transport.Attachment{Filename: filepath.Base(path), ContentType: contentType, Data: data, Inline: contentID != "", ContentID: contentID}
	if a.ContentType == "" {
		a.ContentType = ContentType(data, a.Filename)
	}
	return a, nil
}

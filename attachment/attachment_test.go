package attachment

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/transport"
)

func TestContentType(t *testing.T) {
	assert.Equal(t, "application/pdf", ContentType([]byte("%PDF-1.7\n..."), "x.bin"), "the bytes win over the name")
	assert.Equal(t, "image/png", ContentType([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), "logo"))
	assert.Equal(t, "text/csv", ContentType([]byte("a,b\n1,2\n"), "data.csv"))
	assert.Equal(t, "application/octet-stream", ContentType([]byte{0, 1, 2, 3, 0xff}, "blob"))
}

func TestWithTypes(t *testing.T) {
	m := &transport.Message{Attachments: []transport.Attachment{
		{Filename: "a.pdf", Data: []byte("%PDF-1.4")},
		{Filename: "b", ContentType: "text/x-given", Data: []byte("%PDF-1.4")},
	}}
	got := WithTypes(m)
	assert.Equal(t, "application/pdf", got.Attachments[0].ContentType)
	assert.Equal(t, "text/x-given", got.Attachments[1].ContentType, "a given type is kept")
	assert.Empty(t, m.Attachments[0].ContentType, "the caller's message is not changed")
	assert.Same(t, got, WithTypes(got), "nothing to fill in: the same message")
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "Rechnung März.pdf")
	require.NoError(t, os.WriteFile(path, []byte("%PDF-1.4 hello"), 0o600))
	a, err := ReadFile(path, "", "", 1<<20)
	require.NoError(t, err)
	assert.Equal(t, transport.Attachment{Filename: "Rechnung März.pdf", ContentType: "application/pdf", Data: []byte("%PDF-1.4 hello")}, a)

	a, err = ReadFile(path, "application/x-mine", "inv@x", 1<<20)
	require.NoError(t, err)
	assert.True(t, a.Inline)
	assert.Equal(t, "application/x-mine", a.ContentType)

	_, err = ReadFile(path, "", "", 4)
	assert.ErrorContains(t, err, "larger than the limit of 4")
	_, err = ReadFile(dir, "", "", 1<<20)
	assert.ErrorContains(t, err, "not a regular file")
}

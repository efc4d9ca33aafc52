package smtp_test

import (
	"bytes"
	"testing"

	"github.com/mailspool/mailspool/conformance"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReturnPathIsMailFrom: a message's ReturnPath (a VERP address) is
// the envelope sender; the From header stays, and no header carries it.
func TestReturnPathIsMailFrom(t *testing.T) {
	t.Parallel()
	s := startServer(t, script{})
	tr := open(t, s.url(""))
	m := message()
	m.ReturnPath = "bounces+news.42.abcdefghij@bounces.example.com"
	_, err := send(t, tr, m)
	require.NoError(t, err)
	got := s.mail()
	require.Len(t, got, 1)
	assert.Equal(t, m.ReturnPath, got[0].from, "MAIL FROM")
	parsed, err := conformance.ParseMIME(got[0].raw)
	require.NoError(t, err)
	assert.Contains(t, parsed.Header.Get("From"), "shop@example.com")
	assert.False(t, bytes.Contains(got[0].raw, []byte("bounces+")), "the return path is not written into the mail:\n%s", got[0].raw)

	m = message()
	m.ReturnPath = "not an address\r\nX: y"
	_, err = send(t, tr, m)
	require.Error(t, err)
	assert.Len(t, s.mail(), 1, "an invalid return path never reaches the wire")
}

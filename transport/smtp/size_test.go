package smtp_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/transport"
)

// TestSizeOverServerLimitIsPermanent: a mail whose encoded size is over the
// SIZE the server announced is refused before MAIL FROM, Permanent (no
// retry fixes it), and the connection goes on to carry a mail that fits.
func TestSizeOverServerLimitIsPermanent(t *testing.T) {
	t.Parallel()
	s := startServer(t, script{maxSize: 64 << 10})
	tr := open(t, s.url(""))
	big := message()
	big.Attachments = []transport.Attachment{{Filename: "big.bin", ContentType: "application/octet-stream", Data: make([]byte, 60<<10)}}
	_, err := send(t, tr, big)
	require.Error(t, err)
	var te *transport.Error
	require.ErrorAs(t, err, &te)
	assert.Equal(t, transport.Permanent, te.Kind, "over SIZE: %v", err)
	assert.Equal(t, "smtp-size", te.Rule)
	assert.Equal(t, transport.ScopeMessage, te.Scope, "about the message, not the recipient or the lane")
	assert.Contains(t, err.Error(), "SIZE limit of 65536")
	_, _, mails, _, _ := s.counts()
	assert.Zero(t, mails, "nothing of the mail reached the server")

	small := message()
	small.Attachments = []transport.Attachment{{Filename: "small.bin", ContentType: "application/octet-stream", Data: make([]byte, 30<<10)}}
	_, err = send(t, tr, small)
	require.NoError(t, err, "a mail under SIZE goes out")
	assert.Len(t, s.mail(), 1)
}

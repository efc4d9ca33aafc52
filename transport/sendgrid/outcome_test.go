package sendgrid

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/transport"
)

func TestErrorDetail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, want string
	}{
		{"v3 errors with fields", `{"errors":[{"message":"Bad to","field":"personalizations.0.to","help":null},{"message":"No subject","field":null}]}`, "Bad to (personalizations.0.to); No subject"},
		{"four errors, three kept", `{"errors":[{"message":"a"},{"message":"b"},{"message":"c"},{"message":"d"}]}`, "a; b; c; and 1 more"},
		{"line breaks in a message", `{"errors":[{"message":"line one\r\nline two"}]}`, "line one line two"},
		{"html title", "<HTML><HEAD><TITLE>413 Request Entity Too Large</TITLE></HEAD></HTML>", "413 Request Entity Too Large"},
		{"case change that resizes UTF-8 before the title", "İİİİ<title>ok</title>", "ok"},
		{"unterminated title", "<title>never closed", ""},
		{"empty", "", ""},
		{"other JSON", `{"message":"not the v3 shape"}`, ""},
		{"invalid UTF-8 in a title", "<title>bad \xff byte</title>", "bad \uFFFD byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, errorDetail(tt.body), "errorDetail(%q)", tt.body)
		})
	}
}

func TestCleanCutsOnARuneBoundary(t *testing.T) {
	t.Parallel()
	got := clean(strings.Repeat("é", maxDetailLen))
	require.LessOrEqual(t, len(got), maxDetailLen+len("..."), "clean of a long text: %q", got)
	require.True(t, strings.HasSuffix(got, "..."), "clean of a long text %q does not end in ...", got)
	assert.True(t, strings.HasPrefix(got, "éé"), "clean cut inside a rune: %q", got)
	assert.NotContains(t, got, "\uFFFD", "clean cut inside a rune")
}

// TestClassifyUnverifiedSender: the v3 API's answer for a from address that
// is not a verified Sender Identity (message as recorded in
// github.com/sendgrid/sendgrid-nodejs issue 1088) is our setup, not the mail.
func TestClassifyUnverifiedSender(t *testing.T) {
	body := `{"errors":[{"message":"The from address does not match a verified Sender Identity. Mail cannot be sent until this error is resolved. Visit https://sendgrid.com/docs/for-developers/sending-email/sender-identity/ to see the Sender Identity requirements","field":"from","help":null}]}`
	var te *transport.Error
	require.ErrorAs(t, Classify(403, body), &te)
	assert.Equal(t, transport.Connection, te.Kind)
	assert.Equal(t, transport.ScopeSender, te.Scope, "our sender: the lane's alert, not its breaker")
	assert.Equal(t, "http-sender", te.Rule)
	assert.Contains(t, te.Detail, "does not match a verified Sender Identity")
	require.NoError(t, Classify(202, ""))
}

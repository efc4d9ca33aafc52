package cli

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEnqueueAttachments: --attach (repeatable, ;type= and ;inline=) and
// the --file JSON form queue attachments and a priority; show --full lists
// the attachments by name, type and size, never their bytes.
func TestEnqueueAttachments(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "q.db")
	cfg := writeFile(t, "mailspool.toml", "[lanes.tx]\ntransport = \"fake://\"\n")
	code, _, stderr := mailspool(t, "migrate", "--db", db, "--config", cfg)
	require.Equal(t, 0, code, stderr)

	pdf := filepath.Join(dir, "Rechnung März.pdf")
	require.NoError(t, os.WriteFile(pdf, []byte("%PDF-1.4 secret-pdf-bytes"), 0o600))
	logo := filepath.Join(dir, "logo;v2.png")
	require.NoError(t, os.WriteFile(logo, []byte("\x89PNG\r\n\x1a\nsecret-png-bytes"), 0o600))

	code, out, stderr := mailspool(t, "enqueue", "--db", db, "--config", cfg, "--json",
		"--from", "shop@example.com", "--to", "ann@example.com", "--subject", "Ihre Rechnung", "--text", "anbei",
		"--html", `<p>anbei</p><img src="cid:logo">`, "--priority", "9",
		"--attach", pdf, "--attach", logo+";inline=logo;type=image/png")
	require.Equal(t, 0, code, stderr)
	var res struct{ IDs []int64 }
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Len(t, res.IDs, 1)

	code, out, stderr = mailspool(t, "show", "--db", db, "--config", cfg, "--full", "--id", "1")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "priority     9")
	assert.Contains(t, out, "Rechnung März.pdf   application/pdf, 25 bytes")
	assert.Contains(t, out, "logo;v2.png   image/png, 24 bytes   inline, cid:logo")
	assert.NotContains(t, out, "secret", "show lists attachments, not their bytes")

	code, out, stderr = mailspool(t, "show", "--db", db, "--config", cfg, "--full", "--json", "--id", "1")
	require.Equal(t, 0, code, stderr)
	var shown struct {
		Priority int `json:"priority"`
		Message  struct {
			Attachments []map[string]any `json:"attachments"`
		} `json:"message"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &shown), out)
	assert.Equal(t, 9, shown.Priority)
	assert.Equal(t, []map[string]any{
		{"filename": "Rechnung März.pdf", "content_type": "application/pdf", "size": 25.0},
		{"filename": "logo;v2.png", "content_type": "image/png", "content_id": "logo", "size": 24.0},
	}, shown.Message.Attachments)

	// The JSON form: a file by path, or bytes in base64 with a name.
	mails := `[{"from": "shop@example.com", "to": "bob@example.com", "subject": "s", "text": "t", "priority": 0,
  "attachments": [{"path": ` + jsonString(pdf) + `, "filename": "invoice.pdf"},
                  {"filename": "notes.txt", "content": "` + base64.StdEncoding.EncodeToString([]byte("hello\n")) + `"}]}]`
	code, _, stderr = mailspool(t, "enqueue", "--db", db, "--config", cfg, "--file", writeFile(t, "mails.json", mails))
	require.Equal(t, 0, code, stderr)
	code, out, stderr = mailspool(t, "show", "--db", db, "--config", cfg, "--full", "--id", "2")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "priority     0")
	assert.Contains(t, out, "invoice.pdf   application/pdf, 25 bytes")
	assert.Contains(t, out, "notes.txt   text/plain; charset=utf-8, 6 bytes")

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--attach", filepath.Join(dir, "missing.pdf")}, "missing.pdf"},
		{[]string{"--attach", pdf + ";inline="}, "inline= needs a value"},
		{[]string{"--attach", logo + ";inline=logo"}, "not referenced by the HTML body"},
		{[]string{"--html", `<img src="cid:nothing">`}, "cid:nothing"},
		{[]string{"--priority", "10"}, "priority 10 out of range 0..9"},
	} {
		args := append([]string{"enqueue", "--db", db, "--config", cfg, "--from", "shop@example.com", "--to", "cy@example.com", "--subject", "s", "--text", "t"}, c.args...)
		code, _, stderr = mailspool(t, args...)
		assert.NotEqual(t, 0, code, c.args)
		assert.Contains(t, stderr, c.want, c.args)
	}
	code, out, _ = mailspool(t, "list", "--db", db, "--config", cfg, "--json")
	require.Equal(t, 0, code)
	assert.Equal(t, 2, len(listIDs(t, out)), "the refused enqueues queued nothing")
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

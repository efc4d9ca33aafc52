package cli

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClassifyBuiltIn(t *testing.T) {
	code, out, stderr := mailspool(t, "classify", "550 The from address does not match a verified Sender Identity.")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "kind            connection")
	assert.Contains(t, out, "code            550")
	assert.Contains(t, out, "decided by      smtp-sender (built-in)")
	assert.Contains(t, out, "scope           sender (about our sender, account, domain or IP: retried, never permanent, raises the lane's alert)")

	code, out, stderr = mailspool(t, "classify", "--json", "550 5.2.1 The email account that you tried to reach is disabled.")
	require.Equal(t, 0, code, stderr)
	var res classifyResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, classifyResult{Kind: "permanent", Code: 550, Enhanced: "5.2.1", Scope: "recipient", Recipient: true, Rule: "smtp-recipient-disabled",
		Detail: "The email account that you tried to reach is disabled.", Transport: "smtp"}, res)

	// A Go error text, as go-mail flattens it.
	code, out, _ = mailspool(t, "classify", "--json", "dial tcp 192.0.2.1:587: connect: no route to host")
	require.Equal(t, 0, code)
	res = classifyResult{}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, "connection", res.Kind)
	assert.Equal(t, "net-unreachable", res.Rule)

	code, out, _ = mailspool(t, "classify", "--transport", "ses", "--json", "400 InvalidParameterValue: Missing final '@domain'")
	require.Equal(t, 0, code)
	res = classifyResult{}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, "permanent", res.Kind)
	assert.Equal(t, "ses-InvalidParameterValue-address", res.Rule)

	code, out, _ = mailspool(t, "classify", "--transport", "sendgrid", "--json", `429 {"errors":[{"message":"too many requests"}]}`)
	require.Equal(t, 0, code)
	res = classifyResult{}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, classifyResult{Kind: "temporary", Code: 429, Scope: "transient", Rule: "http-429", Detail: "too many requests", Transport: "sendgrid"}, res)

	// The same 5xx at RCPT TO is about the recipient, at a relay's MAIL FROM
	// about our sender.
	for at, want := range map[string]string{"RCPT": "recipient", "MAIL": "sender"} {
		code, out, stderr = mailspool(t, "classify", "--json", "--relay", "--at", at, "550 5.1.1 Mailbox unavailable")
		require.Equal(t, 0, code, stderr)
		res = classifyResult{}
		require.NoError(t, json.Unmarshal([]byte(out), &res))
		assert.Equal(t, want, res.Scope, "at %s", at)
	}

	code, out, _ = mailspool(t, "classify", "250 2.0.0 OK")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "kind            sent")

	for _, args := range [][]string{
		{"classify"},
		{"classify", "a", "b"},
		{"classify", "--transport", "pigeon", "550 x"},
		{"classify", "--transport", "ses", "no code here"},
		{"classify", "--transport", "sendgrid", "body without status"},
		{"classify", "--at", "HELO", "550 x"},
	} {
		code, _, stderr = mailspool(t, args...)
		assert.Equal(t, 2, code, "%v", args)
		assert.Contains(t, stderr, "mailspool classify:", "%v", args)
	}
}

// TestClassifyAndShowWithLaneRules: a lane's operator rules decide before
// the built-in table, in the classify command and in the worker, and show
// names the rule that failed a mail.
func TestClassifyAndShowWithLaneRules(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "q.db")
	cfg := writeFile(t, "mailspool.toml", `
[lanes.tx]
transport = "fake://?recipient=true"

[[lanes.tx.rules]]
name        = "acme-quota"
code        = 552
text        = "quota.*tomorrow"
kind        = "temporary"
retry_after = "24h"

[[lanes.tx.rules]]
name = "unknown-is-final"
enhanced = "5.1.1"
kind = "permanent"
`)
	code, out, stderr := mailspool(t, "classify", "--config", cfg, "--lane", "tx", "552 5.2.2 Mailbox quota exceeded, cleared tomorrow")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "kind            temporary")
	assert.Contains(t, out, "retry after     24h0m0s")
	assert.Contains(t, out, `decided by      operator:acme-quota (lane tx's rule "acme-quota")`)

	// Without the text the built-in table decides.
	code, out, _ = mailspool(t, "classify", "--config", cfg, "552 5.2.2 Mailbox full")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "decided by      smtp-mailbox-full (built-in)")

	code, _, stderr = mailspool(t, "classify", "--config", cfg, "--lane", "nope", "550 x")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `no lane "nope"`)

	// The worker applies the same rules, and show names the one that decided.
	code, _, stderr = mailspool(t, "migrate", "--db", db, "--config", cfg)
	require.Equal(t, 0, code, stderr)
	code, _, stderr = mailspool(t, "enqueue", "--db", db, "--config", cfg, "--from", "noreply@shop.example", "--to", "bob+550@example.com", "--subject", "s", "--text", "t")
	require.Equal(t, 0, code, stderr)
	code, _, stderr = mailspool(t, "worker", "--db", db, "--config", cfg, "--max-messages", "1", "--log-level", "warn")
	require.Equal(t, 0, code, stderr)
	code, out, stderr = mailspool(t, "show", "--db", db, "--config", cfg, "--id", "1")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "status       failed")
	assert.Contains(t, out, "decided by   rule operator:unknown-is-final")
	assert.Contains(t, out, "about        recipient")
	code, out, stderr = mailspool(t, "show", "--db", db, "--config", cfg, "--id", "1", "--json")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `"last_rule": "operator:unknown-is-final"`)
	assert.Contains(t, out, `"last_scope": "recipient"`)
}

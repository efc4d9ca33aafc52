package config_test

import (
	"strings"
	"testing"

	"github.com/mailspool/mailspool/config"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const unsubscribeOK = `
[lanes.news]
transport = "fake://"
bulk = true

[lanes.tx]
transport = "fake://"
table = "tx_queue"

[unsubscribe]
url = "https://mail.example.com/u/"

[[unsubscribe.keys]]
id = "k2"
secret_env = "TEST_UNSUB_K2"

[[unsubscribe.keys]]
id = "k1"
secret_env = "TEST_UNSUB_K1"
until = "2027-03-01T00:00:00Z"
`

func TestUnsubscribeConfig(t *testing.T) {
	t.Setenv("TEST_UNSUB_K2", strings.Repeat("0f", 32))
	t.Setenv("TEST_UNSUB_K1", "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldC0xMjM0NTY=")
	cfg, err := config.Load(writeConfig(t, unsubscribeOK), "")
	require.NoError(t, err)
	require.NotNil(t, cfg.Unsubscribe)
	for _, l := range cfg.Lanes {
		assert.Equal(t, l.Lane.Name == "news", l.Bulk != nil, l.Lane.Name)
	}

	for _, c := range []struct{ edit, old, want string }{
		{"bulk = true", "", ""},
		{`url = "https://mail.example.com/u/"`, `url = "http://mail.example.com/u/"`, "unsubscribe.url"},
		{`secret_env = "TEST_UNSUB_K2"`, `secret_env = "TEST_UNSUB_NONE"`, "TEST_UNSUB_NONE is empty or not set"},
		{`until = "2027-03-01T00:00:00Z"`, `until = "soon"`, "unsubscribe.keys[1].until"},
		{`until = "2027-03-01T00:00:00Z"`, ``, "a retired key needs the end of its grace period"},
	} {
		text := unsubscribeOK
		if c.want == "" { // a bulk lane without [unsubscribe]
			text = text[:strings.Index(text, "[unsubscribe]")]
			c.want = "lanes.news.bulk"
		} else {
			text = strings.Replace(text, c.edit, c.old, 1)
		}
		_, err := config.Load(writeConfig(t, text), "")
		require.Error(t, err, c.want)
		assert.Contains(t, err.Error(), c.want)
	}
	t.Setenv("TEST_UNSUB_K2", "short-secret-that-is-not-hex")
	_, err = config.Load(writeConfig(t, unsubscribeOK), "")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "short-secret", "the secret never appears in an error")
}

func TestBouncesConfig(t *testing.T) {
	t.Setenv("TEST_VERP_KEY", strings.Repeat("0f", 32))
	base := `
[lanes.news]
transport = "fake://"
verp = true

[lanes.tx]
transport = "fake://"
table = "tx_queue"

[bounces]
domain = "bounces.example.com"
key_env = "TEST_VERP_KEY"
listen = "127.0.0.1:2525"
`
	cfg, err := config.Load(writeConfig(t, base), "")
	require.NoError(t, err)
	require.NotNil(t, cfg.Bounces)
	for _, l := range cfg.Lanes {
		if l.Lane.Name == "news" {
			require.NotNil(t, l.Lane.ReturnPath)
			rp := l.Lane.ReturnPath(7)
			assert.Regexp(t, `^bounces\+news\.7\.[a-z2-7]{10}@bounces\.example\.com$`, rp)
			lane, id, ok := cfg.Bounces.Signer.Parse(rp)
			assert.True(t, ok)
			assert.Equal(t, "news", lane)
			assert.Equal(t, int64(7), id)
		} else {
			assert.Nil(t, l.Lane.ReturnPath, "a lane without verp keeps its From as envelope sender")
		}
	}
	for _, c := range []struct{ old, new, want string }{
		{`key_env = "TEST_VERP_KEY"`, `key_env = "TEST_VERP_NONE"`, "TEST_VERP_NONE is empty or not set"},
		{`domain = "bounces.example.com"`, `domain = "not a domain"`, "not a domain name"},
		{`listen = "127.0.0.1:2525"`, `listen = "nowhere"`, "bounces.listen"},
		{`listen = "127.0.0.1:2525"`, "listen = \"127.0.0.1:2525\"\ntls_cert = \"/etc/ssl/b.crt\"", "tls_cert and tls_key go together"},
		{`listen = "127.0.0.1:2525"`, "listen = \"127.0.0.1:2525\"\ntls_key = \"/etc/ssl/b.key\"", "tls_cert and tls_key go together"},
		{"", "", "lanes.news.verp"},
	} {
		text := strings.Replace(base, c.old, c.new, 1)
		if c.old == "" { // verp without [bounces]
			text = base[:strings.Index(base, "[bounces]")]
		}
		_, err := config.Load(writeConfig(t, text), "")
		require.Error(t, err, c.want)
		assert.Contains(t, err.Error(), c.want)
	}
}

package config_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"testing"
	"time"

	"github.com/mailspool/mailspool/config"
	"github.com/mailspool/mailspool/suppress"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadServeAndSuppression(t *testing.T) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	require.NoError(t, err)
	t.Setenv("TEST_SG_KEY", base64.StdEncoding.EncodeToString(der))
	cfg, err := config.Load(writeConfig(t, `
[lanes.resets]
transport = "fake://"
[lanes.resets.suppression]
bypass = true
complaint = "30d"
unsubscribe = "off"
hold = "6h"

[serve]
listen = "0.0.0.0:8025"
window = "5m"
unsubscribe_scope = "resets"
[serve.sendgrid]
verification_key_env = "TEST_SG_KEY"
[serve.ses]
topic_arns = ["arn:aws:sns:eu-west-1:123456789012:ses-events"]
`), "")
	require.NoError(t, err)
	p := cfg.Lanes[0].Suppression
	assert.True(t, p.Bypass)
	assert.Equal(t, 30*24*time.Hour, p.Complaint)
	assert.Equal(t, suppress.Off, p.Unsubscribe)
	assert.Equal(t, suppress.Forever, p.HardBounce)
	assert.Equal(t, 6*time.Hour, p.Hold)
	require.NotNil(t, cfg.Serve)
	assert.Equal(t, "0.0.0.0:8025", cfg.Serve.Listen)
	assert.NotNil(t, cfg.Serve.Options.SendGridKey)
	assert.Equal(t, 5*time.Minute, cfg.Serve.Options.Window)
	assert.Equal(t, []string{"arn:aws:sns:eu-west-1:123456789012:ses-events"}, cfg.Serve.Options.SESTopics)

	rk, err := rsa.GenerateKey(rand.Reader, 1024)
	require.NoError(t, err)
	rsaDER, err := x509.MarshalPKIXPublicKey(&rk.PublicKey)
	require.NoError(t, err)
	for name, c := range map[string]struct{ toml, want string }{
		"an RSA key": {`[serve]
listen = ":8025"
[serve.sendgrid]
verification_key = "` + base64.StdEncoding.EncodeToString(rsaDER) + `"`, "not an ECDSA P-256 key"},
		"a key that is not base64": {`[serve]
listen = ":8025"
[serve.sendgrid]
verification_key = "!!"`, "serve.sendgrid.verification_key"},
		"a foreign ARN": {`[serve]
listen = ":8025"
[serve.ses]
topic_arns = ["my-topic"]`, "serve.ses.topic_arns"},
		"no provider": {"[serve]\nlisten = \":8025\"", "nothing to serve"},
		"unsubscribes everywhere": {`[serve]
listen = ":8025"
unsubscribe_scope = "all"
[serve.ses]
topic_arns = ["arn:aws:sns:eu-west-1:123456789012:ses-events"]`, "serve.unsubscribe_scope: inbound: an unsubscribe applies to one lane"},
		"a bad policy":          {"[lanes.x.suppression]\nhard_bounce = \"sometimes\"", "lanes.x.suppression: hard_bounce"},
		"an unknown reason key": {"[lanes.x.suppression]\nsoft_bounce = \"forever\"", "unknown key"},
		"a bad hold":            {"[lanes.x.suppression]\nhold = \"-1h\"", "lanes.x.suppression: hold"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := config.Load(writeConfig(t, "[lanes.x]\ntransport = \"fake://\"\n"+c.toml), "")
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

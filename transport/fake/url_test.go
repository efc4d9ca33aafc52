package fake

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/transport"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]Options{
		"fake://":  {},
		"fake:///": {},
		"fake://user:pw@anyhost/?script=ok,+421+,550&cycle=true&recipient=1&timeout=2s&latency=5ms": {
			Script: []string{"ok", "421", "550"}, Cycle: true, Recipient: true, Timeout: 2 * time.Second, Latency: 5 * time.Millisecond,
		},
		"fake://?cycle=false&script=hang": {Script: []string{"hang"}},
	} {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		got, err := parseURL(u)
		if !assert.NoError(t, err, raw) {
			continue
		}
		assert.Equal(t, want, *got, raw)
	}
}

func TestOpenURLErrors(t *testing.T) {
	t.Parallel()
	var mux transport.Mux
	mux.Register(Scheme, URLOpener{})
	for raw, want := range map[string]string{
		"fake://u:hunter2@h?scrpit=ok":            `unknown parameter "scrpit"`,
		"fake://u:hunter2@h?script=ok&script=550": `parameter "script" given 2 times`,
		"fake://u:hunter2@h?script=ok,5500":       `fake: unknown step "5500"`,
		"fake://u:hunter2@h?script=ok,,550":       `fake: unknown step ""`,
		"fake://u:hunter2@h?cycle=yes":            `fake: cycle="yes"`,
		"fake://u:hunter2@h?recipient=2":          `fake: recipient="2"`,
		"fake://u:hunter2@h?timeout=5":            `fake: timeout in URL "fake://u:xxxxx@h?timeout=5": "5" is not a positive duration`,
		"fake://u:hunter2@h?latency=-5ms":         `"-5ms" is not a positive duration`,
		"fake://?latency=213504d":                 `"213504d" is too long`,
		"fake://u:hunter2@h/550":                  "fake: URL",
	} {
		tr, err := mux.OpenTransport(context.Background(), raw)
		if err == nil {
			_ = tr.Close()
		}
		if !assert.Error(t, err, "%s: opened, want an error containing %q", raw, want) {
			continue
		}
		assert.Contains(t, err.Error(), want, raw)
		assert.NotContains(t, err.Error(), "hunter2", "%s: error shows the password", raw)
	}
	_, err := (URLOpener{}).OpenTransportURL(context.Background(), &url.URL{Scheme: "smtp"})
	assert.Error(t, err, "opened an smtp URL")
}

func TestOpenURLSends(t *testing.T) {
	t.Parallel()
	var mux transport.Mux
	mux.Register(Scheme, URLOpener{})
	tr, err := mux.OpenTransport(context.Background(), "fake://?script=550,ok")
	require.NoError(t, err)
	defer tr.Close()
	got := sendKinds(t, tr.(*Transport), "rcpt@example.net", 2)
	assert.Equal(t, []transport.Kind{transport.Permanent, transport.Sent}, got, "kinds")
}

package sendgrid

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testKey = "SG.secret-key-value.xyz"

func TestOpenURL(t *testing.T) {
	tests := []struct {
		name     string
		url      string
		env      string
		base     string
		timeout  time.Duration
		key      string
		errWants string // substring of the error; "" means success
	}{
		{name: "password key", url: "sendgrid://apikey:" + testKey + "@default", base: DefaultEndpoint, timeout: DefaultTimeout, key: testKey},
		{name: "empty user name", url: "sendgrid://:" + testKey + "@default", base: DefaultEndpoint, timeout: DefaultTimeout, key: testKey},
		{name: "environment key", url: "sendgrid://default", env: "SG.from-env", base: DefaultEndpoint, timeout: DefaultTimeout, key: "SG.from-env"},
		{name: "URL key wins over environment", url: "sendgrid://apikey:" + testKey + "@default", env: "SG.from-env", base: DefaultEndpoint, timeout: DefaultTimeout, key: testKey},
		{name: "eu host", url: "sendgrid://apikey:" + testKey + "@eu", base: EUEndpoint, timeout: DefaultTimeout, key: testKey},
		{name: "endpoint and timeout", url: "sendgrid://apikey:" + testKey + "@default?endpoint=http://127.0.0.1:8025/&timeout=5s", base: "http://127.0.0.1:8025", timeout: 5 * time.Second, key: testKey},
		{name: "endpoint with path prefix", url: "sendgrid://apikey:" + testKey + "@default?endpoint=https://proxy.example/sendgrid/", base: "https://proxy.example/sendgrid", timeout: DefaultTimeout, key: testKey},
		{name: "no key", url: "sendgrid://default", errWants: "no API key"},
		{name: "key in user name", url: "sendgrid://" + testKey + "@default", errWants: "user name must be empty"},
		// The key in the user name is refused before any error that quotes the URL.
		{name: "key in user name and unknown parameter", url: "sendgrid://" + testKey + "@default?bogus=1", errWants: "user name must be empty"},
		{name: "key in user name and repeated parameter", url: "sendgrid://" + testKey + "@default?timeout=5s&timeout=6s", errWants: "user name must be empty"},
		{name: "key in user name and unknown host", url: "sendgrid://" + testKey + "@api.sendgrid.com", errWants: "user name must be empty"},
		{name: "key in user name and path", url: "sendgrid://" + testKey + "@default/v3", errWants: "user name must be empty"},
		{name: "key in user name and eu with endpoint", url: "sendgrid://" + testKey + "@eu?endpoint=http://127.0.0.1:1", errWants: "user name must be empty"},
		{name: "key in the endpoint's user name", url: "sendgrid://apikey:" + testKey + "@default?endpoint=" + url.QueryEscape("ftp://"+testKey+"@127.0.0.1:8025"), errWants: "must not contain user info"},
		{name: "unknown parameter", url: "sendgrid://apikey:" + testKey + "@default?region=eu", errWants: `unknown parameter "region"`},
		{name: "unknown host", url: "sendgrid://apikey:" + testKey + "@api.sendgrid.com", errWants: `host must be "default" or "eu"`},
		{name: "eu with endpoint", url: "sendgrid://apikey:" + testKey + "@eu?endpoint=http://127.0.0.1:1", errWants: "both the host"},
		{name: "eu with an endpoint with user info", url: "sendgrid://apikey:K@eu?endpoint=https://proxyuser:" + testKey + "@proxy.example", errWants: "both the host"},
		{name: "path", url: "sendgrid://apikey:" + testKey + "@default/v3", errWants: "must not have a path"},
		{name: "bad timeout", url: "sendgrid://apikey:" + testKey + "@default?timeout=30", errWants: "not a positive duration"},
		{name: "negative timeout", url: "sendgrid://apikey:" + testKey + "@default?timeout=-1s", errWants: "not a positive duration"},
		{name: "endpoint without scheme", url: "sendgrid://apikey:" + testKey + "@default?endpoint=127.0.0.1:8025", errWants: "http:// or https://"},
		{name: "endpoint with user info", url: "sendgrid://apikey:" + testKey + "@default?endpoint=" + url.QueryEscape("http://u:"+testKey+"@127.0.0.1:8025"), errWants: "must not contain user info"},
		{name: "key with a space", url: "sendgrid://apikey:SG.bad%20key@default", errWants: "contains spaces"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvAPIKey, tt.env)
			u, err := url.Parse(tt.url)
			require.NoError(t, err)
			tr, err := URLOpener{}.OpenTransportURL(context.Background(), u)
			if tt.errWants != "" {
				if err == nil {
					tr.Close()
				}
				require.Error(t, err, "opened; want an error containing %q", tt.errWants)
				msg := err.Error()
				assert.Contains(t, msg, tt.errWants)
				assert.NotContains(t, msg, testKey, "the key leaked into the error")
				assert.True(t, strings.HasPrefix(msg, "sendgrid: ") || strings.HasPrefix(msg, "transport: "), "error %q has no package prefix", msg)
				return
			}
			require.NoError(t, err)
			defer tr.Close()
			got := tr.(*Transport)
			assert.Equal(t, tt.key, got.key, "key")
			assert.Equal(t, tt.base, got.base, "base")
			assert.Equal(t, tt.timeout, got.timeout, "timeout")
		})
	}
}

func TestOpenOptions(t *testing.T) {
	t.Setenv(EnvAPIKey, "")
	_, err := Open(context.Background(), nil)
	assert.ErrorContains(t, err, "no API key", "Open(nil) without %s", EnvAPIKey)
	_, err = Open(context.Background(), &Options{APIKey: testKey, Timeout: -time.Second})
	assert.ErrorContains(t, err, "negative", "negative timeout")
	tr, err := Open(context.Background(), &Options{APIKey: testKey})
	require.NoError(t, err)
	assert.Equal(t, DefaultEndpoint, tr.base, "default base")
	assert.Equal(t, DefaultTimeout, tr.timeout, "default timeout")
	require.NoError(t, tr.Close())
	assert.NoError(t, tr.Close(), "second Close (idempotent)")
}

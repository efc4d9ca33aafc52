package sendgrid

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"
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
		{name: "unknown parameter", url: "sendgrid://apikey:" + testKey + "@default?region=eu", errWants: `unknown parameter "region"`},
		{name: "unknown host", url: "sendgrid://apikey:" + testKey + "@api.sendgrid.com", errWants: `host must be "default" or "eu"`},
		{name: "eu with endpoint", url: "sendgrid://apikey:" + testKey + "@eu?endpoint=http://127.0.0.1:1", errWants: "both the host"},
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
			if err != nil {
				t.Fatal(err)
			}
			tr, err := URLOpener{}.OpenTransportURL(context.Background(), u)
			if tt.errWants != "" {
				if err == nil {
					tr.Close()
					t.Fatalf("opened; want an error containing %q", tt.errWants)
				}
				msg := err.Error()
				if !strings.Contains(msg, tt.errWants) {
					t.Errorf("error %q does not contain %q", msg, tt.errWants)
				}
				if strings.Contains(msg, testKey) {
					t.Errorf("the key leaked into the error %q", msg)
				}
				if !strings.HasPrefix(msg, "sendgrid: ") && !strings.HasPrefix(msg, "transport: ") {
					t.Errorf("error %q has no package prefix", msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			got := tr.(*Transport)
			if got.key != tt.key {
				t.Errorf("key = %q, want %q", got.key, tt.key)
			}
			if got.base != tt.base {
				t.Errorf("base = %q, want %q", got.base, tt.base)
			}
			if got.timeout != tt.timeout {
				t.Errorf("timeout = %v, want %v", got.timeout, tt.timeout)
			}
		})
	}
}

func TestOpenOptions(t *testing.T) {
	t.Setenv(EnvAPIKey, "")
	if _, err := Open(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "no API key") {
		t.Errorf("Open(nil) without %s: err = %v, want a missing key error", EnvAPIKey, err)
	}
	if _, err := Open(context.Background(), &Options{APIKey: testKey, Timeout: -time.Second}); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("negative timeout: err = %v, want an error", err)
	}
	tr, err := Open(context.Background(), &Options{APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	if tr.base != DefaultEndpoint || tr.timeout != DefaultTimeout {
		t.Errorf("defaults: base %q timeout %v, want %q %v", tr.base, tr.timeout, DefaultEndpoint, DefaultTimeout)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Errorf("second Close: %v, want nil (idempotent)", err)
	}
}

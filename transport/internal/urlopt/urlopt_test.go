package urlopt

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestEndpoint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw  string
		want string // the error contains it; "" means valid
	}{
		{"https://api.example.com", ""},
		{"http://127.0.0.1:8025/prefix/", ""},
		{"127.0.0.1:8025", "is not an http:// or https:// URL"},
		{"ftp://127.0.0.1", "must start with http:// or https://"},
		{"http://", "has no host"},
		{"http://u:hunter2@127.0.0.1", "must not contain user info"},
		{"http://127.0.0.1?x=1", "must not have a query or fragment"},
		{"http://127.0.0.1#top", "must not have a query or fragment"},
		{"http://u:hunter2@[::1", "is not an http:// or https:// URL"},
		// A token in the user name is never quoted, whatever else is wrong.
		{"http://hunter2@127.0.0.1", `endpoint "http://xxxxx@127.0.0.1" must not contain user info`},
		{"ftp://hunter2@127.0.0.1", "must not contain user info"},
		{"http://hunter2@", "must not contain user info"},
		{"http://hunter2:@127.0.0.1?x=1", "must not contain user info"},
	}
	for _, tt := range tests {
		u, err := Endpoint(tt.raw)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("Endpoint(%q) = %v, want no error", tt.raw, err)
		case tt.want == "" && u.String() != tt.raw:
			t.Errorf("Endpoint(%q) = %q, want it unchanged", tt.raw, u)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("Endpoint(%q) error = %v, want one containing %q", tt.raw, err, tt.want)
		case err != nil && strings.Contains(err.Error(), "hunter2"):
			t.Errorf("Endpoint(%q) error %q contains the password", tt.raw, err)
		}
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		query string
		want  time.Duration
		ok    bool
	}{
		{"", 0, true},
		{"timeout=5s", 5 * time.Second, true},
		{"timeout=250ms", 250 * time.Millisecond, true},
		{"timeout=30", 0, false},
		{"timeout=soon", 0, false},
		{"timeout=0s", 0, false},
		{"timeout=2d", 48 * time.Hour, true},
		{"timeout=213504d", 0, false},
		{"timeout=-1s", 0, false},
	}
	for _, tt := range tests {
		u := &url.URL{Scheme: "x", User: url.UserPassword("k", "hunter2"), Host: "default", RawQuery: tt.query}
		got, err := Timeout(u)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("Timeout(%q) = %v, %v; want %v, ok %v", tt.query, got, err, tt.want, tt.ok)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Timeout(%q) error %q contains the password", tt.query, err)
		}
	}
}

package smtp_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/transport/smtp"
)

func TestURLErrors(t *testing.T) {
	t.Setenv("SMTP_TEST_EMPTY", "")
	for _, tc := range []struct{ url, want string }{
		{"smtp://mail.example.com?tsl=none", `unknown parameter "tsl"`},
		{"smtp://mail.example.com?tls=none&tls=none", "given 2 times"},
		{"smtp://mail.example.com?tls=ssl", "want starttls, implicit or none"},
		{"smtps://mail.example.com?tls=starttls", "smtps means tls=implicit"},
		{"smtps://mail.example.com?tls=none", "smtps means tls=implicit"},
		{"ftp://mail.example.com", "not smtp or smtps"},
		{"smtp://mail.example.com:0", "invalid port"},
		{"smtp://mail.example.com:70000", "invalid port"},
		{"smtp://mail.example.com/inbox", "unexpected path"},
		{"smtp:///", "invalid host"},
		{"smtp://mail.example.com?timeout=30", "not a positive duration"},
		{"smtp://mail.example.com?timeout=-1s", "not a positive duration"},
		{"smtp://mail.example.com?idle_timeout=0s", "not a positive duration"},
		{"smtp://mail.example.com?timeout=213504d", "too long"},
		{"smtp://mail.example.com?pool=0", "not a positive number"},
		{"smtp://mail.example.com?pool=many", "not a positive number"},
		{"smtp://mail.example.com?helo=a%20b", "white space"},
		{"smtp://user@mail.example.com", "has no password"},
		{"smtp://:pw@mail.example.com", "no user name"},
		{"smtp://user:pw@mail.example.com?password_env=SMTP_TEST_PW", "both a password and password_env"},
		{"smtp://user@mail.example.com?password_env=SMTP_TEST_UNSET_VARIABLE", "is not set"},
		{"smtp://user@mail.example.com?password_env=SMTP_TEST_EMPTY", "is not set"},
		{"smtp://mail.example.com?ca_file=/nonexistent/ca.pem", "read ca_file"},
		{"smtp://localhost?tls=none&ca_file=/x.pem", "need TLS"},
		{"smtp://localhost?tls=none&server_name=mx.test", "need TLS"},
		{"smtp://user:pw@mail.example.com?tls=none", "in clear"},
		{"smtp://user:pw@10.0.0.1?tls=none", "in clear"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			u, err := url.Parse(tc.url)
			require.NoError(t, err)
			tr, err := smtp.URLOpener{}.OpenTransportURL(context.Background(), u)
			if err == nil {
				_ = tr.Close()
			}
			require.Error(t, err, "opened, want an error containing %q", tc.want)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), "smtp: ") || strings.HasPrefix(err.Error(), "transport: "), "error %q is not prefixed with its package", err)
			assert.NotContains(t, err.Error(), ":pw@", "the error shows the password")
		})
	}
}

func TestURLOpens(t *testing.T) {
	t.Setenv("SMTP_TEST_PW", "from-env")
	for _, raw := range []string{
		"smtp://mail.example.com",
		"smtps://mail.example.com",
		"smtp://mail.example.com?tls=implicit",
		"smtp://mail.example.com/",
		"smtp://user:pw@mail.example.com:2525?timeout=5s&idle_timeout=1m&pool=8&helo=client.example.com&server_name=mx.example.com",
		"smtp://user@mail.example.com?password_env=SMTP_TEST_PW",
		"smtp://localhost:25?tls=none",
		"smtp://user:pw@localhost?tls=none",
		"smtp://user:pw@127.0.0.2?tls=none",
		"smtp://user:pw@[::1]:25?tls=none",
	} {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		tr, err := smtp.URLOpener{}.OpenTransportURL(context.Background(), u)
		if !assert.NoError(t, err, raw) {
			continue
		}
		assert.NoError(t, tr.Close(), "%s: Close", raw)
	}
}

// TestPasswordFromEnvironment authenticates with a password that only the
// environment holds.
func TestPasswordFromEnvironment(t *testing.T) {
	t.Setenv("SMTP_TEST_PASSWORD", testPassword)
	s := startServer(t, script{auth: []string{"PLAIN"}})
	u := strings.Replace(s.url("password_env=SMTP_TEST_PASSWORD"), urlUser(testUser, testPassword), url.User(testUser).String()+"@", 1)
	_, err := send(t, open(t, u), message())
	require.NoError(t, err, "send")
	_, auths, _, _, _ := s.counts()
	assert.Equal(t, 1, auths, "AUTH the server saw")
}

func TestOpenWithOptions(t *testing.T) {
	t.Parallel()
	s := startServer(t, script{auth: []string{"PLAIN"}})
	tr, err := smtp.Open(context.Background(), s.host, s.port, &smtp.Options{
		Username: testUser, Password: testPassword, CAFile: s.caFile, Pool: 1,
	})
	require.NoError(t, err)
	defer tr.Close()
	_, err = send(t, tr, message())
	require.NoError(t, err)
	_, err = smtp.Open(context.Background(), "", 0, nil)
	assert.Error(t, err, "Open with an empty host succeeded")
}

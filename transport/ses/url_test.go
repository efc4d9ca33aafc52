package ses_test

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/ses"
)

func TestURLErrors(t *testing.T) {
	t.Parallel()
	const secret = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
	var mux transport.Mux
	mux.Register(ses.Scheme, ses.URLOpener{})
	for _, tc := range []struct{ url, want string }{
		{"ses://AKIA1:" + secret + "@default?regoin=eu-west-1", `unknown parameter "regoin"`},
		{"ses://AKIA1:" + secret + "@default?region=eu-west-1&region=us-east-1", `"region" given 2 times`},
		{"ses://AKIA1:" + secret + "@eu-west-1", `host must be "default"`},
		{"ses://AKIA1:" + secret + "@default/v2?region=eu-west-1", "must not have a path"},
		{"ses://AKIA1@default?region=eu-west-1", "ACCESS_KEY_ID:SECRET_ACCESS_KEY"},
		{"ses://:" + secret + "@default?region=eu-west-1", "ACCESS_KEY_ID:SECRET_ACCESS_KEY"},
		// A secret in the user name is refused before any error that quotes the URL.
		{"ses://" + secret + "@default?regoin=eu-west-1", "ACCESS_KEY_ID:SECRET_ACCESS_KEY"},
		{"ses://" + secret + "@default?region=eu-west-1&region=us-east-1", "ACCESS_KEY_ID:SECRET_ACCESS_KEY"},
		{"ses://" + secret + "@eu-west-1", "ACCESS_KEY_ID:SECRET_ACCESS_KEY"},
		{"ses://" + secret + "@default/v2?region=eu-west-1", "ACCESS_KEY_ID:SECRET_ACCESS_KEY"},
		{"ses://AKIA1:" + secret + "@default?region=eu-west-1&endpoint=" + url.QueryEscape("ftp://"+secret+"@127.0.0.1"), "must not contain user info"},
		{"ses://AKIA1:" + secret + "@default", "region is required with static credentials"},
		{"ses://AKIA1:" + secret + "@default?region=EU_WEST_1", "not a region name"},
		{"ses://AKIA1:" + secret + "@default?region=eu-west-1&timeout=soon", "not a positive duration"},
		{"ses://AKIA1:" + secret + "@default?region=eu-west-1&timeout=-5s", "not a positive duration"},
		{"ses://AKIA1:" + secret + "@default?region=eu-west-1&endpoint=ftp://127.0.0.1", "must start with http:// or https://"},
		{"ses://AKIA1:" + secret + "@default?region=eu-west-1&endpoint=http://u:p@127.0.0.1", "must not contain user info"},
		{"ses://AKIA1:" + secret + "@default?region=eu-west-1&endpoint=http://", "has no host"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			tr, err := mux.OpenTransport(context.Background(), tc.url)
			require.Error(t, err)
			assert.Nil(t, tr)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), secret)
		})
	}
}

func TestOpenOptionErrors(t *testing.T) {
	t.Parallel()
	_, err := ses.Open(context.Background(), &ses.Options{Region: "eu-west-1", AccessKeyID: "AKIA1"})
	assert.ErrorContains(t, err, "both an access key id and a secret")
	_, err = ses.Open(context.Background(), &ses.Options{Region: "eu-west-1", SecretAccessKey: "only-the-secret"})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "only-the-secret")
	_, err = ses.Open(context.Background(), &ses.Options{Region: "eu-west-1", AccessKeyID: "AKIA1", SecretAccessKey: "s", Timeout: -1})
	assert.ErrorContains(t, err, "negative")
}

// isolateAWS points every AWS configuration source at nothing, so a test
// sees only what it sets and never the developer's ~/.aws, environment or
// instance metadata.
func isolateAWS(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	for _, k := range []string{
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY", "AWS_SECRET_KEY",
		"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME",
		"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SESV2", "AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE", "AWS_CA_BUNDLE",
	} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func TestOpenUsesTheCredentialChain(t *testing.T) {
	isolateAWS(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAFROMENVIRONMENT")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret-from-environment")
	t.Setenv("AWS_REGION", "ap-southeast-2")
	f := newFakeSES(t, func(w http.ResponseWriter, _ *http.Request) { writeMessageID(w, newMessageID()) })

	var mux transport.Mux
	mux.Register(ses.Scheme, ses.URLOpener{})
	for _, tc := range []struct{ url, region string }{
		{"ses://default?endpoint=" + f.srv.URL, "ap-southeast-2"},
		{"ses://default?region=eu-central-1&endpoint=" + f.srv.URL, "eu-central-1"},
	} {
		tr, err := mux.OpenTransport(context.Background(), tc.url)
		require.NoError(t, err)
		_, err = tr.Send(context.Background(), testMessage())
		require.NoError(t, err)
		require.NoError(t, tr.Close())
		reqs := f.Requests()
		require.NotEmpty(t, reqs)
		assert.Equal(t, "AKIAFROMENVIRONMENT", reqs[len(reqs)-1].AccessKeyID)
		assert.Equal(t, tc.region, reqs[len(reqs)-1].Region)
	}
}

func TestNoCredentialsIsConnectionAndNotSent(t *testing.T) {
	isolateAWS(t)
	t.Setenv("AWS_REGION", "eu-west-1")
	f := newFakeSES(t, func(w http.ResponseWriter, _ *http.Request) { writeMessageID(w, newMessageID()) })
	tr, err := ses.Open(context.Background(), &ses.Options{Endpoint: f.srv.URL})
	require.NoError(t, err, "credentials are resolved at Send")
	defer tr.Close()
	_, err = tr.Send(context.Background(), testMessage())
	require.Error(t, err)
	assert.Equal(t, transport.Connection, transport.KindOf(err), "%v", err)
	assert.Empty(t, f.Requests())
}

func TestOpenWithoutRegion(t *testing.T) {
	isolateAWS(t)
	_, err := ses.Open(context.Background(), nil)
	assert.ErrorContains(t, err, "ses: no AWS region")
}

func TestStaticCredentialsIgnoreTheChain(t *testing.T) {
	isolateAWS(t)
	// The chain would fail to load (no such profile) and would sign with
	// other credentials for another region.
	t.Setenv("AWS_PROFILE", "no-such-profile")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAFROMENVIRONMENT")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret-from-environment")
	t.Setenv("AWS_REGION", "ap-southeast-2")
	_, err := ses.Open(context.Background(), nil)
	require.Error(t, err, "the chain is broken on purpose")

	f := newFakeSES(t, func(w http.ResponseWriter, _ *http.Request) { writeMessageID(w, newMessageID()) })
	tr := openStatic(t, f.srv.URL, nil)
	_, err = tr.Send(context.Background(), testMessage())
	require.NoError(t, err)
	require.Len(t, f.Requests(), 1)
	assert.Equal(t, testKeyID, f.Requests()[0].AccessKeyID)
	assert.Equal(t, "eu-west-1", f.Requests()[0].Region)
}

// TestCABundleFromTheChain checks that a CA bundle named by the AWS
// configuration (AWS_CA_BUNDLE) is trusted, as the SDK's own client would.
func TestCABundleFromTheChain(t *testing.T) {
	isolateAWS(t)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, problem := readSendEmail(r); problem != "" {
			t.Errorf("bad request: %s", problem)
		}
		writeMessageID(w, "from-tls-server")
	}))
	defer srv.Close()
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	require.NoError(t, os.WriteFile(bundle, pemBytes, 0o600))
	t.Setenv("AWS_CA_BUNDLE", bundle)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAFROMENVIRONMENT")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret-from-environment")

	tr, err := ses.Open(context.Background(), &ses.Options{Region: "eu-west-1", Endpoint: srv.URL})
	require.NoError(t, err)
	defer tr.Close()
	rc, err := tr.Send(context.Background(), testMessage())
	require.NoError(t, err)
	assert.Equal(t, "from-tls-server", rc.MessageID)
}

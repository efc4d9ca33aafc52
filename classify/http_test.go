package classify

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHTTP(t *testing.T) {
	t.Parallel()
	jsonH := http.Header{"Content-Type": {"application/json"}}
	htmlH := http.Header{"Content-Type": {"text/html; charset=utf-8"}}
	textH := http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
	tests := []struct {
		name   string
		status int
		header http.Header
		body   string
		want   want
	}{
		{"200", 200, nil, "", accepted},
		{"202 sendgrid accepted", 202, jsonH, "", accepted},
		{"204", 204, nil, "", accepted},
		{"301", 301, nil, "", accepted},

		{"429 retry-after seconds", 429, http.Header{"Retry-After": {"7"}}, "", want{temporary, 429, "", 7 * time.Second, "Too Many Requests"}},
		{"429 sendgrid body", 429, http.Header{"Retry-After": {"60"}, "Content-Type": {"application/json"}},
			`{"errors":[{"field":null,"message":"too many requests"}]}`, want{temporary, 429, "", time.Minute, "too many requests"}},
		{"429 garbage hints", 429, http.Header{"Retry-After": {"soon"}, "X-Ratelimit-Reset": {"later"}}, "", want{temporary, 429, "", 0, ""}},
		{"429 past reset", 429, http.Header{"X-Ratelimit-Reset": {"1000"}}, "", want{temporary, 429, "", 0, ""}},
		{"500 html", 500, htmlH, "<html><body><h1>500 Internal Server Error</h1></body></html>", want{temporary, 500, "", 0, "Internal Server Error"}},
		{"502 empty", 502, nil, "", want{temporary, 502, "", 0, "Bad Gateway"}},
		{"503 retry-after", 503, http.Header{"Retry-After": {"120"}}, "", want{temporary, 503, "", 2 * time.Minute, ""}},
		{"503 ignores rate limit reset", 503, http.Header{"X-Ratelimit-Reset": {strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)}}, "", want{temporary, 503, "", 0, ""}},
		{"503 envoy text", 503, textH, "upstream connect error or disconnect/reset before headers. reset reason: connection failure",
			want{temporary, 503, "", 0, "upstream connect error or disconnect/reset before headers. reset reason: connection failure"}},

		{"400 sendgrid errors", 400, jsonH,
			`{"errors":[{"message":"The from email does not contain a valid address.","field":"from.email","help":"http://sendgrid.com/docs/API_Reference/Web_API_v3/Mail/errors.html#message.from"},{"message":"The subject is required.","field":"subject","help":null}]}`,
			want{connection, 400, "", 0, "The from email does not contain a valid address.; The subject is required."}},
		{"400 ses message", 400, http.Header{"Content-Type": {"application/json"}, "X-Amzn-Errortype": {"MessageRejected"}},
			`{"message":"Email address is not verified. The following identities failed the check in region EU-WEST-1: a@example.com"}`,
			want{connection, 400, "", 0, "Email address is not verified. The following identities failed the check in region EU-WEST-1: a@example.com"}},
		{"400 aws Message key", 400, jsonH, `{"__type":"BadRequestException","Message":"Invalid header"}`, want{permanent, 400, "", 0, "Invalid header"}},
		{"413 nginx html", 413, htmlH, "<html>\r\n<head><title>413 Request Entity Too Large</title></head>\r\n<body><center><h1>413 Request Entity Too Large</h1></center><hr><center>nginx</center></body></html>",
			want{permanent, 413, "", 0, "Request Entity Too Large"}},
		{"413 html without content type", 413, nil, "<!DOCTYPE html><html></html>", want{permanent, 413, "", 0, "Request Entity Too Large"}},
		{"422", 422, jsonH, `{"message":"Invalid email address"}`, want{permanent, 422, "", 0, "Invalid email address"}},

		{"401 sendgrid", 401, jsonH, `{"errors":[{"message":"The provided authorization grant is invalid, expired, or revoked","field":null,"help":null}]}`,
			want{connection, 401, "", 0, "The provided authorization grant is invalid, expired, or revoked"}},
		{"401 error object", 401, jsonH, `{"error":{"code":401,"message":"Invalid API key"}}`, want{connection, 401, "", 0, "Invalid API key"}},
		{"401 error string", 401, jsonH, `{"error":"invalid_grant"}`, want{connection, 401, "", 0, "invalid_grant"}},
		{"402", 402, nil, "", want{connection, 402, "", 0, "Payment Required"}},
		{"403 sendgrid", 403, jsonH, `{"errors":[{"message":"access forbidden","field":null,"help":null}]}`, want{connection, 403, "", 0, "access forbidden"}},
		{"404 ses", 404, jsonH, `{"message":"Configuration set <x> does not exist."}`, want{connection, 404, "", 0, "Configuration set <x> does not exist."}},
		{"405", 405, nil, "", want{connection, 405, "", 0, "Method Not Allowed"}},
		{"407", 407, nil, "", want{connection, 407, "", 0, ""}},
		{"415", 415, nil, "", want{connection, 415, "", 0, ""}},

		{"408", 408, nil, "", want{temporary, 408, "", 0, "Request Timeout"}},
		{"409", 409, nil, "", want{temporary, 409, "", 0, ""}},
		{"425", 425, nil, "", want{temporary, 425, "", 0, ""}},
		{"418 unknown 4xx", 418, nil, "", want{temporary, 418, "", 0, ""}},
		{"499 no status text", 499, nil, "", want{temporary, 499, "", 0, ""}},

		{"0 invalid", 0, nil, "", want{temporary, 0, "", 0, ""}},
		{"100 invalid", 100, nil, "", want{temporary, 100, "", 0, ""}},
		{"600 invalid", 600, nil, "", want{temporary, 600, "", 0, ""}},

		{"json without message", 400, jsonH, `{"code":"bad"}`, want{permanent, 400, "", 0, "Bad Request"}},
		{"json array", 400, jsonH, `[{"message":"x"}]`, want{permanent, 400, "", 0, "Bad Request"}},
		{"broken json", 400, jsonH, `{"message":`, want{permanent, 400, "", 0, "Bad Request"}},
		{"html with json content type", 502, jsonH, "<html>bad gateway</html>", want{temporary, 502, "", 0, "Bad Gateway"}},
		{"other media type", 400, http.Header{"Content-Type": {"application/octet-stream"}}, "\x00\x01", want{permanent, 400, "", 0, "Bad Request"}},
		{"multi-line text", 400, textH, "bad\r\nrequest\x00", want{permanent, 400, "", 0, "bad request"}},
		{"long text capped", 400, textH, strings.Repeat("x", 1000), want{permanent, 400, "", 0, strings.Repeat("x", 197) + "..."}},
		{"huge body ignored", 400, textH, strings.Repeat("x", maxBody+1), want{permanent, 400, "", 0, "Bad Request"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			check(t, tc.want, HTTP(tc.status, tc.header, []byte(tc.body)))
		})
	}
}

// The two cases below compute against the clock: the bounds leave room
// for a slow machine.

func TestHTTP429RetryAfterDate(t *testing.T) {
	t.Parallel()
	h := http.Header{"Retry-After": {time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)}}
	te := asError(HTTP(429, h, nil))
	require.NotNil(t, te)
	require.Greater(t, te.RetryAfter, 20*time.Second)
	require.LessOrEqual(t, te.RetryAfter, 30*time.Second)
}

func TestHTTP429RateLimitReset(t *testing.T) {
	t.Parallel()
	h := http.Header{"X-Ratelimit-Reset": {strconv.FormatInt(time.Now().Add(60*time.Second).Unix(), 10)}}
	te := asError(HTTP(429, h, nil))
	require.NotNil(t, te)
	require.Greater(t, te.RetryAfter, 50*time.Second)
	require.LessOrEqual(t, te.RetryAfter, 60*time.Second)
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		value string
		want  time.Duration
	}{
		{"120", 2 * time.Minute},
		{" 7 ", 7 * time.Second},
		{"0", 0},
		{"", 0},
		{"-5", 0},
		{"1.5", 0},
		{"soon", 0},
		{"86400", MaxRetryAfter},
		{"999999999", MaxRetryAfter},
		{"99999999999999999999999999", MaxRetryAfter},
		{"Sun, 01 Mar 2026 12:01:30 GMT", 90 * time.Second},
		{"Sunday, 01-Mar-26 12:00:10 GMT", 10 * time.Second},
		{"Sun Mar  1 12:00:05 2026", 5 * time.Second},
		{"Sun, 01 Mar 2026 11:59:00 GMT", 0},
		{"Wed, 04 Mar 2026 12:00:00 GMT", MaxRetryAfter},
		{"Sun, 01 Mar 2026 12:01:30", 0},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, RetryAfter(tc.value, now), "RetryAfter(%q)", tc.value)
	}
}

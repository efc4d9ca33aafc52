package sendgrid_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/conformance"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/sendgrid"
)

const testKey = "SG.test-key.do-not-leak"

func testMessage() *transport.Message {
	return &transport.Message{
		MessageID: "order-42@shop.example.com",
		From:      mail.Address{Name: "Shop", Address: "shop@example.com"},
		To:        mail.Address{Name: "Ana", Address: "ana@example.net"},
		ReplyTo:   mail.Address{Address: "help@example.com"},
		Subject:   "Your order",
		Text:      "plain body",
		HTML:      "<p>html body</p>",
		Headers: []transport.Header{
			{Name: "List-Unsubscribe", Value: "<https://shop.example.com/u/1>"},
			{Name: "List-Unsubscribe-Post", Value: "List-Unsubscribe=One-Click"},
		},
	}
}

func TestSendStatuses(t *testing.T) {
	t.Parallel()
	reset := time.Now().Add(90 * time.Second).Unix()
	tests := []struct {
		name       string
		status     int
		header     http.Header
		body       string
		kind       transport.Kind
		detail     []string // substrings of Detail
		retryAfter [2]time.Duration
	}{
		{
			name:   "400 with several errors",
			status: 400,
			header: http.Header{"Content-Type": {"application/json"}},
			body: `{"errors":[{"message":"The to array is required for all personalization objects, and must have at least one email object with a valid email address.","field":"personalizations.0.to","help":"http://sndgr.id/x"},` +
				`{"message":"The subject is required.","field":"subject","help":null}]}`,
			kind:   transport.Permanent,
			detail: []string{"The to array is required", "(personalizations.0.to)", "; The subject is required. (subject)"},
		},
		{
			name:   "413 html page from a proxy",
			status: 413,
			header: http.Header{"Content-Type": {"text/html"}},
			body:   "<html>\r\n<head><title>413 Request Entity Too Large</title></head>\r\n<body><center><h1>413 Request Entity Too Large</h1></center><hr><center>nginx</center></body>\r\n</html>\r\n",
			kind:   transport.Permanent,
			detail: []string{"413 Request Entity Too Large"},
		},
		{name: "empty 503", status: 503, kind: transport.Temporary},
		{
			name:       "429 with only X-RateLimit-Reset",
			status:     429,
			header:     http.Header{"X-Ratelimit-Reset": {strconv.FormatInt(reset, 10)}, "Content-Type": {"application/json"}},
			body:       `{"errors":[{"field":null,"message":"too many requests"}]}`,
			kind:       transport.Temporary,
			detail:     []string{"too many requests"},
			retryAfter: [2]time.Duration{60 * time.Second, 91 * time.Second},
		},
		{
			name:       "429 with Retry-After",
			status:     429,
			header:     http.Header{"Retry-After": {"7"}},
			kind:       transport.Temporary,
			retryAfter: [2]time.Duration{7 * time.Second, 7 * time.Second},
		},
		{
			name:   "401 bad key",
			status: 401,
			body:   `{"errors":[{"field":null,"message":"The provided authorization grant is invalid, expired, or revoked","help":null}]}`,
			kind:   transport.Connection,
			detail: []string{"authorization grant is invalid"},
		},
		{
			name:   "403 unverified sender",
			status: 403,
			body:   `{"errors":[{"message":"The from address does not match a verified Sender Identity.","field":"from","help":null}]}`,
			kind:   transport.Connection,
			detail: []string{"verified Sender Identity"},
		},
		{name: "500", status: 500, body: `{"errors":[{"message":"internal error"}]}`, kind: transport.Temporary, detail: []string{"internal error"}},
		{name: "502 plain text", status: 502, body: "Bad Gateway", kind: transport.Temporary},
		{
			name:   "error body echoing the key",
			status: 401,
			body:   `{"errors":[{"message":"key ` + testKey + ` is revoked"}]}`,
			kind:   transport.Connection,
			detail: []string{"key xxxxx is revoked"},
		},
		{
			name:   "redirect is not followed",
			status: 307,
			header: http.Header{"Location": {"/elsewhere"}},
			kind:   transport.Connection,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &scripted{status: tt.status, header: tt.header, body: tt.body}
			tr := api.open(t)
			receipt, err := tr.Send(context.Background(), testMessage())
			require.Equal(t, tt.kind, transport.KindOf(err), "kind of %v", err)
			assert.Zero(t, receipt, "receipt on failure")
			var te *transport.Error
			require.ErrorAs(t, err, &te)
			assert.Equal(t, tt.status, te.Code, "Code")
			assert.False(t, te.MaybeDelivered, "MaybeDelivered set for an HTTP answer")
			for _, d := range tt.detail {
				assert.Contains(t, te.Detail, d)
			}
			assert.NotContains(t, err.Error(), testKey, "error text contains the API key")
			assert.False(t, strings.ContainsAny(te.Detail, "\r\n<>") && !strings.Contains(tt.body, "errors"), "Detail %q keeps markup or line breaks", te.Detail)
			assert.GreaterOrEqual(t, te.RetryAfter, tt.retryAfter[0], "RetryAfter")
			assert.LessOrEqual(t, te.RetryAfter, tt.retryAfter[1], "RetryAfter")
			assert.EqualValues(t, 1, api.calls.Load(), "requests that reached the API")
		})
	}
}

func TestSendLongErrorListIsShort(t *testing.T) {
	t.Parallel()
	var errs []string
	for i := range 20 {
		errs = append(errs, `{"message":"`+strings.Repeat("problem ", 10)+strconv.Itoa(i)+`","field":"f"}`)
	}
	api := &scripted{status: 400, body: `{"errors":[` + strings.Join(errs, ",") + `]}`}
	_, err := api.open(t).Send(context.Background(), testMessage())
	var te *transport.Error
	require.ErrorAs(t, err, &te)
	require.Equal(t, transport.Permanent, te.Kind, "kind of %v", err)
	assert.LessOrEqual(t, len(te.Detail), 400, "Detail should be a short text: %q", te.Detail)
	assert.Contains(t, te.Detail, "more", "Detail should say that more errors were left out")
}

func TestSendRequestShape(t *testing.T) {
	t.Parallel()
	var raw map[string]any
	var header http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header = r.Header.Clone()
		assert.NoError(t, json.NewDecoder(r.Body).Decode(&raw), "body")
		w.Header().Set("X-Message-Id", "abc.123")
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	tr, err := sendgrid.Open(context.Background(), &sendgrid.Options{APIKey: testKey, Endpoint: srv.URL + "/"})
	require.NoError(t, err)
	defer tr.Close()
	m := testMessage()
	m.MessageID = ""
	receipt, err := tr.Send(context.Background(), m)
	require.NoError(t, err)
	assert.Equal(t, "abc.123", receipt.MessageID, "receipt MessageID is the X-Message-Id")
	assert.Equal(t, "Bearer "+testKey, header.Get("Authorization"))
	content, _ := raw["content"].([]any)
	require.Len(t, content, 2, "content = %v, want text and html", raw["content"])
	assert.Equal(t, "text/plain", content[0].(map[string]any)["type"], "first content")
	headers, _ := raw["headers"].(map[string]any)
	id, _ := headers["Message-ID"].(string)
	assert.Regexp(t, `^<.+@example\.com>$`, id, "generated Message-ID, want <random@example.com>")
	assert.Equal(t, "List-Unsubscribe=One-Click", headers["List-Unsubscribe-Post"], "headers = %v", headers)
	assert.Equal(t, "help@example.com", raw["reply_to"].(map[string]any)["email"], "reply_to = %v", raw["reply_to"])
}

func TestSendRejectsBeforeTheWire(t *testing.T) {
	t.Parallel()
	dup := testMessage()
	dup.Headers = append(dup.Headers, transport.Header{Name: "list-unsubscribe", Value: "<mailto:u@example.com>"})
	injected := testMessage()
	injected.Subject = "hi\r\nBcc: victim@example.org"
	for name, m := range map[string]*transport.Message{"duplicate header": dup, "header injection": injected} {
		t.Run(name, func(t *testing.T) {
			api := &scripted{status: http.StatusAccepted}
			_, err := api.open(t).Send(context.Background(), m)
			assert.Equal(t, transport.Permanent, transport.KindOf(err), "kind of %v", err)
			assert.Zero(t, api.calls.Load(), "requests that reached the API")
		})
	}
}

func TestSendAfterClose(t *testing.T) {
	t.Parallel()
	api := &scripted{status: http.StatusAccepted}
	tr := api.open(t)
	require.NoError(t, tr.Close())
	_, err := tr.Send(context.Background(), testMessage())
	assert.ErrorIs(t, err, transport.ErrClosed, "Send after Close")
	assert.Zero(t, api.calls.Load(), "Send after Close reached the API")
}

// A stall after the whole body was read may hide an accepted mail; a
// refused connection provably does not.
func TestSendMaybeDelivered(t *testing.T) {
	for _, s := range []conformance.Scenario{conformance.StallAfterData, conformance.Refused} {
		t.Run(string(s), func(t *testing.T) {
			h, err := newHarness(context.Background(), t)
			require.NoError(t, err)
			defer h.Close()
			tr, err := h.Open(context.Background(), s)
			require.NoError(t, err)
			defer tr.Close()
			// The deadline leaves a busy machine time to write the whole
			// request before it (as the conformance suite's stallDeadline
			// does); the stall itself lasts until the request ends.
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			_, err = tr.Send(ctx, testMessage())
			var te *transport.Error
			require.ErrorAs(t, err, &te)
			want := s == conformance.StallAfterData
			assert.Equal(t, want, te.MaybeDelivered, "MaybeDelivered of %v", err)
			if want {
				assert.Equal(t, transport.Temporary, te.Kind, "kind")
			} else {
				assert.Equal(t, transport.Connection, te.Kind, "kind")
			}
		})
	}
}

// TestSendInternationalizedAddresses: addresses go to the API in 7-bit
// ASCII, an internationalized domain as its A-label; a local part that is
// not ASCII is Permanent and never reaches the API.
func TestSendInternationalizedAddresses(t *testing.T) {
	var to string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var raw struct {
			Personalizations []struct {
				To []struct{ Email string } `json:"to"`
			} `json:"personalizations"`
		}
		if err := json.NewDecoder(r.Body).Decode(&raw); err != nil {
			t.Errorf("body: %v", err)
		}
		to = raw.Personalizations[0].To[0].Email
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	tr, err := sendgrid.Open(context.Background(), &sendgrid.Options{APIKey: testKey, Endpoint: srv.URL + "/"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	m := testMessage()
	m.To.Address = "b@bücher.example"
	if _, err := tr.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if to != "b@xn--bcher-kva.example" {
		t.Errorf("to = %q, want the A-label b@xn--bcher-kva.example", to)
	}
	to = ""
	m.To.Address = "jürgen@example.com"
	if _, err := tr.Send(context.Background(), m); transport.KindOf(err) != transport.Permanent || !strings.Contains(err.Error(), "SMTPUTF8") {
		t.Errorf("err = %v, want Permanent naming SMTPUTF8", err)
	}
	// Our own address so: the lane's sender, not this mail.
	sender := *m
	sender.To.Address, sender.From.Address = "b@example.com", "bücher@example.com"
	if _, err := tr.Send(context.Background(), &sender); transport.KindOf(err) != transport.Temporary || transport.ScopeOf(err) != transport.ScopeSender {
		t.Errorf("err = %v, want Temporary of sender scope", err)
	}
	if to != "" {
		t.Error("the mail reached the API")
	}
}

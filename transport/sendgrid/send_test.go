package sendgrid_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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

// scripted is an API that answers every request with one fixed response
// and counts the requests.
type scripted struct {
	status int
	header http.Header
	body   string
	calls  atomic.Int32
}

func (s *scripted) open(t *testing.T) *sendgrid.Transport {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		for k, vs := range s.header {
			w.Header()[k] = vs
		}
		w.WriteHeader(s.status)
		_, _ = io.WriteString(w, s.body)
	}))
	t.Cleanup(srv.Close)
	tr, err := sendgrid.Open(context.Background(), &sendgrid.Options{APIKey: testKey, Endpoint: srv.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

func TestSendStatuses(t *testing.T) {
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
			if got := transport.KindOf(err); got != tt.kind {
				t.Fatalf("kind = %v (%v), want %v", got, err, tt.kind)
			}
			if receipt != (transport.Receipt{}) {
				t.Errorf("receipt = %+v on failure, want zero", receipt)
			}
			var te *transport.Error
			if !errors.As(err, &te) {
				t.Fatalf("error %v has no *transport.Error", err)
			}
			if te.Code != tt.status {
				t.Errorf("Code = %d, want %d", te.Code, tt.status)
			}
			if te.MaybeDelivered {
				t.Errorf("MaybeDelivered set for an HTTP answer")
			}
			for _, d := range tt.detail {
				if !strings.Contains(te.Detail, d) {
					t.Errorf("Detail %q does not contain %q", te.Detail, d)
				}
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error text %q contains the API key", err)
			}
			if strings.ContainsAny(te.Detail, "\r\n<>") && !strings.Contains(tt.body, "errors") {
				t.Errorf("Detail %q keeps markup or line breaks", te.Detail)
			}
			if te.RetryAfter < tt.retryAfter[0] || te.RetryAfter > tt.retryAfter[1] {
				t.Errorf("RetryAfter = %v, want in [%v, %v]", te.RetryAfter, tt.retryAfter[0], tt.retryAfter[1])
			}
			if n := api.calls.Load(); n != 1 {
				t.Errorf("%d requests reached the API, want exactly 1", n)
			}
		})
	}
}

func TestSendLongErrorListIsShort(t *testing.T) {
	var errs []string
	for i := range 20 {
		errs = append(errs, `{"message":"`+strings.Repeat("problem ", 10)+strconv.Itoa(i)+`","field":"f"}`)
	}
	api := &scripted{status: 400, body: `{"errors":[` + strings.Join(errs, ",") + `]}`}
	_, err := api.open(t).Send(context.Background(), testMessage())
	var te *transport.Error
	if !errors.As(err, &te) || te.Kind != transport.Permanent {
		t.Fatalf("err = %v, want Permanent", err)
	}
	if len(te.Detail) > 400 {
		t.Errorf("Detail is %d bytes, want a short text: %q", len(te.Detail), te.Detail)
	}
	if !strings.Contains(te.Detail, "more") {
		t.Errorf("Detail %q does not say that more errors were left out", te.Detail)
	}
}

func TestSendRequestShape(t *testing.T) {
	var raw map[string]any
	var header http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header = r.Header.Clone()
		if err := json.NewDecoder(r.Body).Decode(&raw); err != nil {
			t.Errorf("body: %v", err)
		}
		w.Header().Set("X-Message-Id", "abc.123")
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	tr, err := sendgrid.Open(context.Background(), &sendgrid.Options{APIKey: testKey, Endpoint: srv.URL + "/"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	m := testMessage()
	m.MessageID = ""
	receipt, err := tr.Send(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	if receipt.MessageID != "abc.123" {
		t.Errorf("receipt MessageID = %q, want the X-Message-Id abc.123", receipt.MessageID)
	}
	if got := header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization = %q", got)
	}
	content, _ := raw["content"].([]any)
	if len(content) != 2 {
		t.Fatalf("content = %v, want text and html", raw["content"])
	}
	if typ := content[0].(map[string]any)["type"]; typ != "text/plain" {
		t.Errorf("first content is %v, want text/plain", typ)
	}
	headers, _ := raw["headers"].(map[string]any)
	id, _ := headers["Message-ID"].(string)
	if !strings.HasPrefix(id, "<") || !strings.HasSuffix(id, "@example.com>") {
		t.Errorf("generated Message-ID = %q, want <random@example.com>", id)
	}
	if headers["List-Unsubscribe-Post"] != "List-Unsubscribe=One-Click" {
		t.Errorf("headers = %v, missing List-Unsubscribe-Post", headers)
	}
	if raw["reply_to"].(map[string]any)["email"] != "help@example.com" {
		t.Errorf("reply_to = %v", raw["reply_to"])
	}
}

func TestSendRejectsBeforeTheWire(t *testing.T) {
	dup := testMessage()
	dup.Headers = append(dup.Headers, transport.Header{Name: "list-unsubscribe", Value: "<mailto:u@example.com>"})
	injected := testMessage()
	injected.Subject = "hi\r\nBcc: victim@example.org"
	for name, m := range map[string]*transport.Message{"duplicate header": dup, "header injection": injected} {
		t.Run(name, func(t *testing.T) {
			api := &scripted{status: http.StatusAccepted}
			_, err := api.open(t).Send(context.Background(), m)
			if transport.KindOf(err) != transport.Permanent {
				t.Errorf("err = %v, want Permanent", err)
			}
			if n := api.calls.Load(); n != 0 {
				t.Errorf("%d requests reached the API, want none", n)
			}
		})
	}
}

func TestSendAfterClose(t *testing.T) {
	api := &scripted{status: http.StatusAccepted}
	tr := api.open(t)
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := tr.Send(context.Background(), testMessage())
	if !errors.Is(err, sendgrid.ErrClosed) {
		t.Errorf("Send after Close: %v, want ErrClosed", err)
	}
	if api.calls.Load() != 0 {
		t.Errorf("Send after Close reached the API")
	}
}

// A stall after the whole body was read may hide an accepted mail; a
// refused connection provably does not.
func TestSendMaybeDelivered(t *testing.T) {
	for _, s := range []conformance.Scenario{conformance.StallAfterData, conformance.Refused} {
		t.Run(string(s), func(t *testing.T) {
			h, err := newHarness(context.Background(), t)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			tr, err := h.Open(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, err = tr.Send(ctx, testMessage())
			var te *transport.Error
			if !errors.As(err, &te) {
				t.Fatalf("err = %v, want a *transport.Error", err)
			}
			want := s == conformance.StallAfterData
			if te.MaybeDelivered != want {
				t.Errorf("MaybeDelivered = %v, want %v (%v)", te.MaybeDelivered, want, err)
			}
			if want && te.Kind != transport.Temporary {
				t.Errorf("kind = %v, want temporary", te.Kind)
			}
			if !want && te.Kind != transport.Connection {
				t.Errorf("kind = %v, want connection", te.Kind)
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
	if to != "" {
		t.Error("the mail reached the API")
	}
}

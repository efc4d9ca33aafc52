package ses_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// sendEmailRequest is the part of a SES v2 SendEmail request body the fake
// reads, written from the SES API reference rather than the SDK's types.
type sendEmailRequest struct {
	FromEmailAddress string
	Destination      struct {
		ToAddresses  []string
		CcAddresses  []string
		BccAddresses []string
	}
	ReplyToAddresses []string
	Content          struct {
		Raw *struct {
			Data []byte // base64 in the JSON
		}
		Simple   json.RawMessage
		Template json.RawMessage
	}
	ConfigurationSetName           string
	FeedbackForwardingEmailAddress string

	// AccessKeyID and Region are read from the SigV4 credential scope.
	AccessKeyID string `json:"-"`
	Region      string `json:"-"`
}

// sigV4 matches the Authorization header of a SigV4-signed SES request.
var sigV4 = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=([A-Z0-9]+)/\d{8}/([a-z0-9-]+)/ses/aws4_request, SignedHeaders=[a-z0-9;-]*host[a-z0-9;-]*, Signature=[0-9a-f]{64}$`)

// fakeSES is an httptest server speaking the SES v2 REST-JSON wire format
// for POST /v2/email/outbound-emails. It checks each request the way SES
// would (method, path, SigV4 header, JSON shape, raw content only), records
// it, and lets answer write the response. A request it rejects fails the
// test.
type fakeSES struct {
	t      *testing.T
	srv    *httptest.Server
	answer func(w http.ResponseWriter, r *http.Request)

	mu       sync.Mutex
	requests []sendEmailRequest
}

// newFakeSES starts a fake SES answering with answer; it stops at the end
// of the test.
func newFakeSES(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *fakeSES {
	t.Helper()
	f := &fakeSES{t: t, answer: answer}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeSES) serve(w http.ResponseWriter, r *http.Request) {
	req, problem := readSendEmail(r)
	if problem != "" {
		f.t.Errorf("fake SES: bad request: %s", problem)
		writeSESError(w, http.StatusBadRequest, "BadRequestException", "fake SES: "+problem)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, *req)
	f.mu.Unlock()
	f.answer(w, r)
}

// Requests returns the requests received so far.
func (f *fakeSES) Requests() []sendEmailRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sendEmailRequest(nil), f.requests...)
}

// readSendEmail decodes a SendEmail request, or says what SES would reject.
func readSendEmail(r *http.Request) (*sendEmailRequest, string) {
	if r.Method != http.MethodPost || r.URL.Path != "/v2/email/outbound-emails" {
		return nil, r.Method + " " + r.URL.Path + ", want POST /v2/email/outbound-emails"
	}
	auth := sigV4.FindStringSubmatch(r.Header.Get("Authorization"))
	if auth == nil {
		return nil, fmt.Sprintf("Authorization %q is not a SigV4 signature for service ses", r.Header.Get("Authorization"))
	}
	if r.Header.Get("X-Amz-Date") == "" {
		return nil, "X-Amz-Date is missing"
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return nil, "Content-Type " + ct + ", want application/json"
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, "read body: " + err.Error()
	}
	var req sendEmailRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, "body is not a SendEmail request: " + err.Error()
	}
	req.AccessKeyID, req.Region = auth[1], auth[2]
	switch {
	case req.Content.Raw == nil || len(req.Content.Raw.Data) == 0:
		return nil, "Content.Raw.Data is missing"
	case req.Content.Simple != nil || req.Content.Template != nil:
		return nil, "Content has Simple or Template besides Raw"
	case len(req.Destination.ToAddresses) != 1 || len(req.Destination.CcAddresses)+len(req.Destination.BccAddresses) != 0:
		return nil, fmt.Sprintf("Destination %+v, want exactly one To address", req.Destination)
	}
	return &req, ""
}

// writeMessageID answers like a successful SendEmail.
func writeMessageID(w http.ResponseWriter, id string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Requestid", randomHex(16))
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprintf(w, `{"MessageId":%q}`, id)
}

// writeSESError answers with an SES v2 error as the service sends it: the
// code in x-amzn-ErrorType and the message in a JSON body.
func writeSESError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Errortype", code)
	w.Header().Set("X-Amzn-Requestid", "req-"+strings.ToLower(code))
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]string{"message": message})
	_, _ = w.Write(b)
}

// newMessageID returns an id shaped like the ones SES returns.
func newMessageID() string {
	return "0102019" + randomHex(6) + "-" + randomHex(4) + "-" + randomHex(2) + "-000000"
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

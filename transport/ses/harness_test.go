package ses_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/mailspool/mailspool/conformance"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/internal/httpbackend"
	"github.com/mailspool/mailspool/transport/ses"
)

// Names the harness gives the transport and checks on every request.
const (
	harnessRegion  = "eu-west-1"
	harnessConfSet = "mailspool-conformance"
)

// harness is a conformance.Harness over a fake SES v2 API on loopback.
type harness struct {
	*httpbackend.Backend
	keyID  string
	secret string
}

func newHarness(_ context.Context, t *testing.T) (conformance.Harness, error) {
	h := &harness{
		keyID:  "AKIA" + strings.ToUpper(randomHex(8)),
		secret: randomHex(20),
	}
	h.Backend = httpbackend.New(t, httpbackend.Wire{
		Provider:   "SES",
		ReadFunc:   h.read,
		AcceptFunc: func(w http.ResponseWriter) { writeMessageID(w, newMessageID()) },
		ErrorFunc:  writeScriptedError,
	})
	return h, nil
}

func (h *harness) Open(ctx context.Context, s conformance.Scenario) (transport.Transport, error) {
	endpoint, err := h.Endpoint(s)
	if err != nil {
		return nil, err
	}
	u := &url.URL{
		Scheme: ses.Scheme,
		User:   url.UserPassword(h.keyID, h.secret),
		Host:   "default",
		RawQuery: url.Values{
			"region":            {harnessRegion},
			"configuration_set": {harnessConfSet},
			"endpoint":          {endpoint},
			"timeout":           {"10s"},
		}.Encode(),
	}
	return ses.URLOpener{}.OpenTransportURL(ctx, u)
}

func (h *harness) Secret() string { return h.secret }

// read checks a SendEmail request as SES and the harness's URL would, and
// returns the raw message with the envelope recipient, as SES delivers it.
func (h *harness) read(r *http.Request) (conformance.Received, error) {
	req, problem := readSendEmail(r) // reads the whole body
	switch {
	case problem != "":
		return conformance.Received{}, errors.New(problem)
	case req.AccessKeyID != h.keyID:
		return conformance.Received{}, fmt.Errorf("signed with access key %s, want the one from the URL", req.AccessKeyID)
	case req.Region != harnessRegion:
		return conformance.Received{}, fmt.Errorf("signed for region %s, want %s", req.Region, harnessRegion)
	case req.ConfigurationSetName != harnessConfSet:
		return conformance.Received{}, fmt.Errorf("ConfigurationSetName %q, want %q", req.ConfigurationSetName, harnessConfSet)
	case req.FromEmailAddress == "":
		return conformance.Received{}, errors.New("FromEmailAddress is missing")
	}
	got, err := conformance.ParseMIME(req.Content.Raw.Data)
	if err != nil {
		return conformance.Received{}, fmt.Errorf("Content.Raw is not a MIME message: %w", err)
	}
	got.To = req.Destination.ToAddresses
	return got, nil
}

// scriptedErrors are the SES error codes and messages for the statuses the
// harness answers with.
var scriptedErrors = map[int]struct{ code, message string }{
	http.StatusBadRequest:          {"BadRequestException", ""},
	http.StatusUnauthorized:        {"UnrecognizedClientException", "The security token included in the request is invalid."},
	http.StatusTooManyRequests:     {"TooManyRequestsException", "Too many requests."},
	http.StatusInternalServerError: {"InternalFailure", "The request processing has failed because of an unknown error, exception or failure."},
	http.StatusNotImplemented:      {"InternalFailure", ""},
}

// writeScriptedError answers with the SES error for status; a non-empty
// detail replaces SES's message.
func writeScriptedError(w http.ResponseWriter, status int, detail string) {
	e := scriptedErrors[status]
	if detail != "" {
		e.message = detail
	}
	writeSESError(w, status, e.code, e.message)
}

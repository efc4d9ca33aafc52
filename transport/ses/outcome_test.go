package ses_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/ses"
)

// TestErrorTable sends through the real SDK to a server answering with SES's
// real error shapes and checks the classified outcome.
func TestErrorTable(t *testing.T) {
	t.Parallel()
	sesError := func(status int, code, message string) func(http.ResponseWriter, *http.Request) {
		return func(w http.ResponseWriter, _ *http.Request) { writeSESError(w, status, code, message) }
	}
	for _, tc := range []struct {
		name   string
		answer func(http.ResponseWriter, *http.Request)
		kind   transport.Kind
		code   int
		maybe  bool
		retry  time.Duration
		detail string // substring of Detail
	}{
		// The message will never be accepted.
		{name: "MessageRejected", answer: sesError(400, "MessageRejected", "Illegal address"),
			kind: transport.Permanent, code: 400, detail: "MessageRejected: Illegal address (request req-messagerejected)"},
		{name: "BadRequestException", answer: sesError(400, "BadRequestException", "Message length is more than 10485760 bytes long"),
			kind: transport.Permanent, code: 400, detail: "BadRequestException: Message length"},

		// InvalidParameterValue about an address of the mail: it will never
		// be accepted (messages recorded in github.com/anymail/django-anymail
		// issue 281, openstax/accounts issue 253, brave/accounts issue 35,
		// SebastiaanKlippert/lambda-ses-forwarder issue 2).
		{name: "InvalidParameterValue missing domain", answer: sesError(400, "InvalidParameterValue", "Missing final '@domain'"),
			kind: transport.Permanent, code: 400, detail: "InvalidParameterValue: Missing final '@domain'"},
		{name: "InvalidParameterValue whitespace", answer: sesError(400, "InvalidParameterValue", "Local address contains control or whitespace"),
			kind: transport.Permanent, code: 400},
		{name: "InvalidParameterValue illegal character", answer: sesError(400, "InvalidParameterValue", "Domain contains illegal character"),
			kind: transport.Permanent, code: 400},
		{name: "InvalidParameterValue missing domain v2", answer: sesError(400, "InvalidParameterValue", "Missing domain"),
			kind: transport.Permanent, code: 400},
		// Any other InvalidParameterValue is about the request we built or
		// our setup: the mail waits (AWS's answer quoted in
		// github.com/localstack/localstack issue 8588).
		{name: "InvalidParameterValue about the request", answer: sesError(400, "InvalidParameterValue", "Invalid tag value <event:id:abc1234>: only alphanumeric ASCII characters, '_', and '-' are allowed."),
			kind: transport.Connection, code: 400},

		// Our account or setup: the mail is fine and waits.
		{name: "sandbox recipient not verified", answer: sesError(400, "MessageRejected",
			"Email address is not verified. The following identities failed the check in region EU-WEST-1: joerg@example.net"),
			kind: transport.Connection, code: 400, detail: "Email address is not verified"},
		{name: "BadRequestException naming setup", answer: sesError(400, "BadRequestException", "Configuration set <marketing> does not exist."),
			kind: transport.Connection, code: 400},
		{name: "MailFromDomainNotVerifiedException", answer: sesError(400, "MailFromDomainNotVerifiedException", "The sending domain is not verified."),
			kind: transport.Connection, code: 400},
		{name: "AccountSuspendedException", answer: sesError(400, "AccountSuspendedException", "The account has been suspended."),
			kind: transport.Connection, code: 400},
		{name: "SendingPausedException", answer: sesError(400, "SendingPausedException", "Sending is paused for this account."),
			kind: transport.Connection, code: 400},
		{name: "NotFoundException", answer: sesError(404, "NotFoundException", "Configuration set <transactional> does not exist."),
			kind: transport.Connection, code: 404},
		{name: "UnrecognizedClientException", answer: sesError(403, "UnrecognizedClientException", "The security token included in the request is invalid."),
			kind: transport.Connection, code: 403},
		{name: "InvalidClientTokenId", answer: sesError(403, "InvalidClientTokenId", "The security token included in the request is invalid."),
			kind: transport.Connection, code: 403},
		{name: "SignatureDoesNotMatch", answer: sesError(403, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided."),
			kind: transport.Connection, code: 403},
		{name: "AccessDeniedException", answer: sesError(403, "AccessDeniedException", "User is not authorized to perform: ses:SendEmail"),
			kind: transport.Connection, code: 403},

		// Throttling and quota.
		{name: "TooManyRequestsException with Retry-After", answer: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "7")
			writeSESError(w, 429, "TooManyRequestsException", "Too many requests.")
		}, kind: transport.Temporary, code: 429, retry: 7 * time.Second},
		{name: "Throttling", answer: sesError(400, "Throttling", "Maximum sending rate exceeded."),
			kind: transport.Temporary, code: 400},
		{name: "LimitExceededException", answer: sesError(400, "LimitExceededException", "Daily message quota exceeded."),
			kind: transport.Temporary, code: 400},

		// The service failed.
		{name: "InternalFailure", answer: sesError(500, "InternalFailure", "The request processing has failed."),
			kind: transport.Temporary, code: 500},
		{name: "ServiceUnavailable with Retry-After", answer: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "30")
			writeSESError(w, 503, "ServiceUnavailable", "Service is unavailable.")
		}, kind: transport.Temporary, code: 503, retry: 30 * time.Second},
		{name: "502 with an empty body", answer: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
		}, kind: transport.Temporary, code: 502},
		{name: "503 HTML from a proxy", answer: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>"))
		}, kind: transport.Temporary, code: 503},

		// Wire variations.
		{name: "namespaced error type", answer: sesError(400, "MessageRejected:http://internal.amazon.com/coral/com.amazonaws.sesv2/", "Illegal address"),
			kind: transport.Permanent, code: 400, detail: "MessageRejected: Illegal address"},
		{name: "error type in the body", answer: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"com.amazonaws.sesv2#AccountSuspendedException","message":"suspended"}`))
		}, kind: transport.Connection, code: 400},
		{name: "unknown code at 400 is not Permanent", answer: sesError(400, "SomeFutureException", "Something new."),
			kind: transport.Temporary, code: 400, detail: "SomeFutureException: Something new."},
		{name: "unknown code at 401", answer: sesError(401, "SomeAuthException", "Who are you?"),
			kind: transport.Connection, code: 401},
		{name: "multi-line message on one line", answer: sesError(400, "MessageRejected", "Illegal\r\naddress\tfound"),
			kind: transport.Permanent, code: 400, detail: "MessageRejected: Illegal address found"},

		{name: "redirect is not followed", answer: func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/v2/email/outbound-emails", http.StatusTemporaryRedirect)
		}, kind: transport.Connection, code: 307},

		// A 2xx that cannot be read: the mail was probably accepted.
		{name: "200 whose body does not parse", answer: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"MessageId": "0102`))
		}, kind: transport.Temporary, code: 200, maybe: true},
		{name: "200 without a MessageId", answer: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{}`))
		}, kind: transport.Temporary, code: 200, maybe: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSES(t, tc.answer)
			tr := openStatic(t, f.srv.URL, nil)
			_, err := tr.Send(context.Background(), testMessage())
			var te *transport.Error
			require.ErrorAs(t, err, &te)
			assert.Equal(t, tc.kind, te.Kind, "kind of %v", err)
			assert.Equal(t, tc.code, te.Code, "code of %v", err)
			assert.Equal(t, tc.maybe, te.MaybeDelivered, "MaybeDelivered of %v", err)
			assert.Equal(t, tc.retry, te.RetryAfter, "RetryAfter of %v", err)
			assert.Contains(t, te.Detail, tc.detail)
			assert.NotContains(t, err.Error(), testSecret)
			assert.Len(t, f.Requests(), 1, "one request per Send")
		})
	}
}

func TestDetailIsShort(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("ü", 1000)
	f := newFakeSES(t, func(w http.ResponseWriter, _ *http.Request) { writeSESError(w, 400, "MessageRejected", long) })
	tr := openStatic(t, f.srv.URL, nil)
	_, err := tr.Send(context.Background(), testMessage())
	var te *transport.Error
	require.ErrorAs(t, err, &te)
	assert.LessOrEqual(t, len(te.Detail), 400)
	assert.True(t, strings.HasPrefix(te.Detail, "MessageRejected: üü"), te.Detail)
	assert.Contains(t, te.Detail, "...")
}

func TestRefusedIsConnection(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	endpoint := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())

	tr := openStatic(t, endpoint, nil)
	_, err = tr.Send(context.Background(), testMessage())
	var te *transport.Error
	require.ErrorAs(t, err, &te)
	assert.Equal(t, transport.Connection, te.Kind, "%v", err)
	assert.False(t, te.MaybeDelivered)
}

func TestClassifyNamesTheRule(t *testing.T) {
	for _, tc := range []struct {
		status        int
		code, message string
		kind          transport.Kind
		rule          string
	}{
		{400, "InvalidParameterValue", "Missing final '@domain'", transport.Permanent, "ses-InvalidParameterValue-address"},
		{400, "InvalidParameterValue", "Invalid tag value <event:id:abc1234>: only alphanumeric ASCII characters, '_', and '-' are allowed.", transport.Connection, "ses-InvalidParameterValue-request"},
		{400, "MessageRejected", "Email address is not verified. The following identities failed the check in region EU-WEST-1: a@example.com", transport.Connection, "ses-MessageRejected-setup"},
		{400, "MessageRejected", "Illegal address", transport.Permanent, "ses-MessageRejected"},
		{400, "SomethingNew", "?", transport.Temporary, "ses-undocumented"},
	} {
		err := ses.Classify(tc.status, tc.code, tc.message)
		var te *transport.Error
		require.ErrorAs(t, err, &te)
		assert.Equal(t, tc.kind, te.Kind, tc.message)
		assert.Equal(t, tc.rule, te.Rule, tc.message)
		assert.Equal(t, tc.code+": "+tc.message, te.Detail)
	}
}

// TestValidationErrorsBySubject: SES's InvalidParameterValue messages
// (recorded in public issues) are split by what they are about: the
// message itself (its headers, size, encoding) and an address of it are
// Permanent of message scope; our identity or account is sender scope;
// the rest is the request the adapter built, lane scope.
func TestValidationErrorsBySubject(t *testing.T) {
	for _, tc := range []struct {
		message string
		source  string
		kind    transport.Kind
		scope   transport.Scope
		rule    string
	}{
		{"Empty header names are illegal.", "https://github.com/aws/aws-sdk-js/issues/4121", transport.Permanent, transport.ScopeMessage, "ses-InvalidParameterValue-message"},
		{"Illegal header '<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.0 Transitional//EN\" \"http'.", "https://github.com/jmhobbs/Swiftmailer-Transport--AWS-SES/issues/13", transport.Permanent, transport.ScopeMessage, "ses-InvalidParameterValue-message"},
		{"Duplicate header 'Content-Type'.", "https://github.com/arithmetric/aws-lambda-ses-forwarder/issues/51", transport.Permanent, transport.ScopeMessage, "ses-InvalidParameterValue-message"},
		{"Header section too long.", "https://github.com/aws/aws-sdk-php/issues/981", transport.Permanent, transport.ScopeMessage, "ses-InvalidParameterValue-message"},
		{"Missing required header 'From'.", "https://github.com/daniel-zahariev/php-aws-ses/issues/8", transport.Permanent, transport.ScopeMessage, "ses-InvalidParameterValue-message"},
		{"Expected '=', got 'null'", "https://github.com/mozilla/fx-private-relay/issues/1887", transport.Permanent, transport.ScopeMessage, "ses-InvalidParameterValue-message"},
		{"Extra route-addr", "https://github.com/arithmetric/aws-lambda-ses-forwarder/issues/91", transport.Permanent, transport.ScopeMessage, "ses-InvalidParameterValue-address"},
		{"Invalid email address", "https://github.com/mozilla/fx-private-relay/issues/1887", transport.Permanent, transport.ScopeMessage, "ses-InvalidParameterValue-address"},
		{"Missing final '@domain'", "https://github.com/mozilla/fx-private-relay/issues/1887", transport.Permanent, transport.ScopeMessage, "ses-InvalidParameterValue-address"},
		{"Invalid ARN <>.", "https://github.com/aws/aws-sdk-php/issues/1716", transport.Connection, transport.ScopeSender, "ses-InvalidParameterValue-sender"},
		{"The address 'Example support <support.dev@example.com>' does not align with the given ARN 'arn:aws:ses:eu-west-1:XXX:identity/support.dev@example.com'", "https://github.com/aws/aws-sdk-js/issues/1146", transport.Connection, transport.ScopeSender, "ses-InvalidParameterValue-sender"},
		{"Invalid tag value <event:id:abc1234>: only alphanumeric ASCII characters, '_', and '-' are allowed.", "the adapter's own request", transport.Connection, transport.ScopeLane, "ses-InvalidParameterValue-request"},
	} {
		var te *transport.Error
		require.ErrorAs(t, ses.Classify(400, "InvalidParameterValue", tc.message), &te, tc.source)
		assert.Equal(t, tc.kind, te.Kind, "%s (%s)", tc.message, tc.source)
		assert.Equal(t, tc.scope, te.Scope, "%s (%s)", tc.message, tc.source)
		assert.Equal(t, tc.rule, te.Rule, tc.message)
	}
	// The service's own codes have scopes too.
	for code, scope := range map[string]transport.Scope{
		"MessageRejected": transport.ScopeMessage, "AccountSuspendedException": transport.ScopeSender,
		"SignatureDoesNotMatch": transport.ScopeLane, "ThrottlingException": transport.ScopeTransient,
	} {
		var te *transport.Error
		require.ErrorAs(t, ses.Classify(400, code, "x"), &te)
		assert.Equal(t, scope, te.Scope, code)
	}
}

package ses

import (
	"errors"
	"net/http"
	"regexp"
	"strings"
	"time"
	"unicode"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/mailspool/mailspool/classify"
	"github.com/mailspool/mailspool/internal/textclip"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/internal/httpapi"
)

// maxDetailLen bounds the Detail taken from an SES error message.
const maxDetailLen = 300

// verdict is the outcome an SES error code stands for.
type verdict struct {
	kind  transport.Kind
	scope transport.Scope
}

// codeKinds maps every SendEmail error code SES (or AWS in front of it)
// answers with to an outcome. Problems of our account or setup are
// Connection, never Permanent: the mail is fine and must wait. Codes not
// listed are classified by their HTTP status (see classifyAPIError).
var codeKinds = map[string]verdict{
	// The service will never accept this message (but see setupProblem).
	"MessageRejected":     {transport.Permanent, transport.ScopeMessage},
	"BadRequestException": {transport.Permanent, transport.ScopeMessage},

	// Our sending identity, account or configuration set.
	"MailFromDomainNotVerifiedException": {transport.Connection, transport.ScopeSender},
	"AccountSuspendedException":          {transport.Connection, transport.ScopeSender},
	"SendingPausedException":             {transport.Connection, transport.ScopeSender},
	"NotFoundException":                  {transport.Connection, transport.ScopeSender}, // identity or configuration set missing

	// Missing, wrong or expired credentials, or no permission to send.
	"UnrecognizedClientException": {transport.Connection, transport.ScopeLane},
	"InvalidClientTokenId":        {transport.Connection, transport.ScopeLane},
	"SignatureDoesNotMatch":       {transport.Connection, transport.ScopeLane},
	"InvalidSignatureException":   {transport.Connection, transport.ScopeLane},
	"IncompleteSignature":         {transport.Connection, transport.ScopeLane},
	"MissingAuthenticationToken":  {transport.Connection, transport.ScopeLane},
	"ExpiredToken":                {transport.Connection, transport.ScopeLane},
	"ExpiredTokenException":       {transport.Connection, transport.ScopeLane},
	"AccessDenied":                {transport.Connection, transport.ScopeLane},
	"AccessDeniedException":       {transport.Connection, transport.ScopeLane},

	// Throttling and the sending quota.
	"TooManyRequestsException": {transport.Temporary, transport.ScopeTransient},
	"Throttling":               {transport.Temporary, transport.ScopeTransient},
	"ThrottlingException":      {transport.Temporary, transport.ScopeTransient},
	"LimitExceededException":   {transport.Temporary, transport.ScopeTransient},

	// The service failed.
	"InternalFailure":               {transport.Temporary, transport.ScopeTransient},
	"InternalServiceErrorException": {transport.Temporary, transport.ScopeTransient},
	"ServiceUnavailable":            {transport.Temporary, transport.ScopeTransient},
}

// setupPhrases are the parts of a MessageRejected or BadRequestException
// message that blame our setup rather than the mail, such as the sandbox's
// "Email address is not verified. The following identities failed the
// check in region EU-WEST-1: ...".
var setupPhrases = []string{
	"not verified",
	"sandbox",
	"not authorized",
	"does not exist", // configuration set, identity
	"suspended",
	"paused",
}

// addressProblem matches SES's InvalidParameterValue messages that reject
// an address of the mail (recorded: "Missing final '@domain'", "Local
// address contains control or whitespace", "Domain contains illegal
// character", "Missing domain", "Missing local name", "Illegal address"):
// the mail as it is will never be accepted. Other InvalidParameterValue
// messages are about the request the adapter built or the account's setup.
var addressProblem = regexp.MustCompile(`(?i)local address|missing final '@domain'|missing domain|missing local name|illegal address|domain contains|domain (starts|ends) with|invalid (email )?address|route-addr|address list`)

// messageProblem matches SES's InvalidParameterValue messages about the
// message itself, its headers, size or encoding (recorded: "Illegal header
// '...'", "Duplicate header 'Content-Type'", "Empty header names are
// illegal", "Header section too long", "Missing required header 'From'",
// "Expected '=', got 'null'" from a broken encoded word, "Message length is
// more than 10485760 bytes long"): the mail as it is will never be accepted.
var messageProblem = regexp.MustCompile(`(?i)header|message length|too (long|large|big)|size|bytes long|encod|charset|mime|content|attachment|subject|body|expected '.*', got|line length|illegal (character|content)|invalid (character|content|message)`)

// senderProblem matches SES's InvalidParameterValue messages about our
// sending identity, account or configuration: "Illegal email address
// 'FromArn'", "Configuration set ... does not exist", "not verified", the
// sending authorization of an identity ARN.
var senderProblem = regexp.MustCompile(`(?i)from ?arn|source ?arn|return ?path ?arn|identity|configuration set|not verified|account|sending authori[sz]ation|feedback forwarding|\barn\b`)

// setupProblem reports whether an SES error message blames our account or
// setup.
func setupProblem(message string) bool {
	message = strings.ToLower(message)
	for _, p := range setupPhrases {
		if strings.Contains(message, p) {
			return true
		}
	}
	return false
}

// classifySendError turns a SendEmail error into a *transport.Error. wrote
// tells whether the whole request had been written before err; now is the
// clock a Retry-After date is measured against.
func classifySendError(err error, wrote bool, now time.Time) error {
	var respErr *awshttp.ResponseError
	if !errors.As(err, &respErr) || respErr.HTTPStatusCode() == 0 {
		// No answer: refused, TLS, timeout, reset, cancelled context.
		return httpapi.NoAnswer(err, wrote)
	}
	status := respErr.HTTPStatusCode()
	if status >= 200 && status < 300 {
		// SES answered success but the body did not parse (or broke off):
		// the mail was probably accepted.
		return &transport.Error{Kind: transport.Temporary, Scope: transport.ScopeTransient, Code: status, MaybeDelivered: true, Rule: "ses-unreadable-answer",
			Detail: "accepted, but the answer could not be read", Err: err}
	}
	header := respErr.Response.Header
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		// An answer that is not an AWS error, such as an HTML 503 from a proxy.
		e := httpapi.StatusError(status, header, nil)
		e.Err = err
		return withRetryAfter(e, header, now)
	}
	e := classifyAPIError(status, header, apiErr.ErrorCode(), apiErr.ErrorMessage())
	e.Detail = detail(apiErr.ErrorCode(), apiErr.ErrorMessage(), respErr.RequestID)
	return withRetryAfter(e, header, now)
}

// classifyAPIError classifies an SES error code by the codeKinds table and,
// for codes it does not name, by the HTTP status. Its Rule is "ses-" and the
// code ("ses-MessageRejected"), with "-setup" when the message blames our
// setup; an InvalidParameterValue is split by what it is about: "-sender"
// (our identity or account: Connection, sender scope), "-address" and
// "-message" (an address, a header, the size or the encoding of the mail:
// Permanent, message scope), else "-request" (the request the adapter
// built: Connection, lane scope).
func classifyAPIError(status int, header http.Header, code, message string) *transport.Error {
	if code == "InvalidParameterValue" {
		switch {
		case senderProblem.MatchString(message):
			return &transport.Error{Kind: transport.Connection, Scope: transport.ScopeSender, Code: status, Rule: "ses-InvalidParameterValue-sender"}
		case addressProblem.MatchString(message):
			return &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeMessage, Code: status, Rule: "ses-InvalidParameterValue-address"}
		case messageProblem.MatchString(message):
			return &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeMessage, Code: status, Rule: "ses-InvalidParameterValue-message"}
		}
		return &transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane, Code: status, Rule: "ses-InvalidParameterValue-request"}
	}
	v, named := codeKinds[code]
	if !named {
		e := httpapi.StatusError(status, header, nil)
		if e.Kind == transport.Permanent {
			// An error SES did not document for SendEmail may be anything:
			// one retry too many is better than dropping a good mail.
			e.Kind, e.Scope, e.Rule = transport.Temporary, transport.ScopeTransient, "ses-undocumented"
		}
		return e
	}
	rule := "ses-" + code
	if v.kind == transport.Permanent && setupProblem(message) {
		v, rule = verdict{transport.Connection, transport.ScopeSender}, rule+"-setup"
	}
	return &transport.Error{Kind: v.kind, Scope: v.scope, Code: status, Rule: rule}
}

// Classify classifies an error answer of SES's SendEmail, as Send does:
// status is the HTTP status, code the AWS error code (such as
// "MessageRejected" or "InvalidParameterValue") and message its message.
// It is for explaining a recorded answer (the mailspool classify command);
// the result has no cause and no retry hint from headers.
func Classify(status int, code, message string) error {
	e := classifyAPIError(status, http.Header{}, code, message)
	e.Detail = detail(code, message, "")
	return e
}

// withRetryAfter sets e.RetryAfter from a Retry-After header unless it is
// already set. SES does not document one, but a proxy or emulator in front
// of it may send it.
func withRetryAfter(e *transport.Error, header http.Header, now time.Time) *transport.Error {
	if e.RetryAfter == 0 {
		if v := header.Get("Retry-After"); v != "" {
			e.RetryAfter = classify.RetryAfter(v, now)
		}
	}
	return e
}

// detail returns "Code: message (request id)" on one line, the code and
// message clipped to maxDetailLen bytes (textclip.Clip).
func detail(code, message, requestID string) string {
	s := code
	if message != "" && message != code {
		s += ": " + message
	}
	s = textclip.Clip(strings.Join(strings.FieldsFunc(s, unicode.IsControl), " "), maxDetailLen)
	if requestID != "" {
		s += " (request " + requestID + ")"
	}
	return s
}

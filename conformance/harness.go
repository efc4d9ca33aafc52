package conformance

import (
	"context"
	"errors"
	"net/textproto"
	"testing"
	"time"

	"github.com/mailspool/mailspool/transport"
)

// Scenario names one scripted behaviour of an adapter's backend. Its string
// is the stable subtest name.
type Scenario string

// The scenarios every harness is asked for. SMTP replies are sent with the
// exact text of [Scenario.Reply]; a harness picks the protocol stage where a
// real server sends that reply (see each constant).
const (
	// Accept: the backend accepts the mail and returns an id.
	Accept Scenario = "accept"
	// SMTP421: "421 4.7.0 ..." at the greeting or MAIL FROM (too many connections).
	SMTP421 Scenario = "smtp-421"
	// SMTP450: "450 4.2.1 ..." at RCPT TO (mailbox temporarily unavailable).
	SMTP450 Scenario = "smtp-450"
	// SMTP451: "451 4.3.0 ..." after the DATA terminator (local error).
	SMTP451 Scenario = "smtp-451"
	// SMTP452: "452 4.2.2 ..." at RCPT TO (over quota, as Gmail sends it).
	SMTP452 Scenario = "smtp-452"
	// SMTP550: "550 5.1.1 ..." at RCPT TO (no such user).
	SMTP550 Scenario = "smtp-550"
	// SMTP552: "552 5.2.2 ..." after the DATA terminator (mailbox full).
	SMTP552 Scenario = "smtp-552"
	// SMTP553: "553 5.1.3 ..." at RCPT TO (bad address syntax).
	SMTP553 Scenario = "smtp-553"
	// SMTP554: "554 5.7.1 ..." after the DATA terminator (rejected by policy).
	SMTP554 Scenario = "smtp-554"
	// Hang: the backend accepts the connection and never answers.
	Hang Scenario = "hang"
	// Refused: nothing listens; the connection is refused.
	Refused Scenario = "refused"
	// TLSFailure: the backend's certificate does not verify (or, for SMTP,
	// STARTTLS is required by the transport but not offered).
	TLSFailure Scenario = "tls-failure"
	// StallAfterData: the backend reads the whole mail (the SMTP DATA
	// terminator, the whole HTTP request body) and then never answers.
	StallAfterData Scenario = "stall-after-data"
	// HTTP429: HTTP 429 with "Retry-After: 7".
	HTTP429 Scenario = "http-429"
	// HTTP401: HTTP 401, the credentials are wrong.
	HTTP401 Scenario = "http-401"
	// HTTP500: HTTP 500, the provider failed.
	HTTP500 Scenario = "http-500"
)

// Scenarios lists every Scenario in the order the suite runs them.
var Scenarios = []Scenario{
	Accept, SMTP421, SMTP450, SMTP451, SMTP452, SMTP550, SMTP552, SMTP553, SMTP554,
	Hang, Refused, TLSFailure, StallAfterData, HTTP429, HTTP401, HTTP500,
}

var replies = map[Scenario]string{
	SMTP421: "421 4.7.0 Too many concurrent SMTP connections from this IP address; please try again later",
	SMTP450: "450 4.2.1 The user you are trying to contact is receiving mail at a rate that prevents additional messages from being delivered",
	SMTP451: "451 4.3.0 Temporary local problem, please try again",
	SMTP452: "452 4.2.2 The email account that you tried to reach is over quota",
	SMTP550: "550 5.1.1 The email account that you tried to reach does not exist",
	SMTP552: "552 5.2.2 Mailbox full",
	SMTP553: "553 5.1.3 The recipient address is not a valid RFC 5321 address",
	SMTP554: "554 5.7.1 Message rejected: the content looks like spam",
}

// Reply returns the one-line SMTP reply a harness sends for an SMTP
// scenario ("" for the others).
func (s Scenario) Reply() string { return replies[s] }

// RetryAfter429 is the Retry-After a harness sends with HTTP429.
const RetryAfter429 = 7 * time.Second

// ErrUnsupported is returned (wrapped, with the reason) by a Harness that
// cannot make its backend behave as a scenario asks; the suite then skips
// that case with the reason.
var ErrUnsupported = errors.New("conformance: not supported by this backend")

// HarnessMaker makes a fresh Harness; the suite calls it once per case, so
// cases never share backend state. The harness must release everything in
// Close (the suite calls it through t.Cleanup).
type HarnessMaker func(ctx context.Context, t *testing.T) (Harness, error)

// Harness is a scenario factory over an adapter's real backend (an
// in-process SMTP server, an httptest server), not a mock. The suite calls
// Open once per Harness; the package documentation details the contract.
type Harness interface {
	// Open returns a new Transport whose backend answers every Send as
	// scenario s says. It returns an error wrapping ErrUnsupported when the
	// backend cannot express s.
	Open(ctx context.Context, s Scenario) (transport.Transport, error)
	// Attempts returns how many delivery attempts reached the backend's
	// wire since Open: SMTP transactions started (MAIL FROM), HTTP send
	// requests received.
	Attempts() int
	// Received returns the mails the backend accepted since Open, as it
	// saw them. It returns an error wrapping ErrUnsupported when the backend
	// cannot show them.
	Received() ([]Received, error)
	// Secret returns a credential given to the transport (URL password, API
	// key) that must never appear in any error text; "" if none.
	Secret() string
	// Close stops the backend.
	Close() error
}

// Received is a mail as the backend saw it, decoded: header words and body
// transfer encodings are undone, so it compares equal to the Message sent.
type Received struct {
	From     string // address only
	FromName string
	To       []string // every recipient the backend was asked to deliver to
	ToName   string   // display name of the first To
	Subject  string
	Text     string // text/plain part, line endings normalised to \n
	HTML     string // text/html part, line endings normalised to \n
	// Header holds every header field as received (canonical keys), e.g.
	// Message-Id (with angle brackets), Reply-To, List-Unsubscribe.
	Header textproto.MIMEHeader
	// Attachments are the files received, attached or inline, in order.
	Attachments []transport.Attachment
}

package ses

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"

	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/internal/httpapi"
	"github.com/mailspool/mailspool/transport/internal/render"
	"github.com/mailspool/mailspool/transport/internal/urlopt"
)

// DefaultTimeout bounds one Send when Options.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// Options configures a Transport. The zero value uses the standard AWS
// configuration chain for credentials and region.
type Options struct {
	// Region is the AWS region, e.g. "eu-west-1"; empty means the region of
	// the AWS configuration chain (AWS_REGION, the shared config profile).
	Region string
	// ConfigurationSet names the SES configuration set every mail is sent
	// with; empty means none (the identity's default, if any).
	ConfigurationSet string
	// Endpoint is the API base URL, e.g. http://127.0.0.1:8005 for an
	// emulator or test server; empty means the SES endpoint of Region.
	Endpoint string
	// AccessKeyID and SecretAccessKey, when both set, are the only
	// credentials used: the AWS configuration chain (environment, shared
	// files, instance metadata) is not consulted at all. Both empty means
	// the chain provides credentials. Meant for emulators and tests.
	AccessKeyID     string
	SecretAccessKey string
	// Timeout bounds one Send, including reading the answer; zero means
	// DefaultTimeout.
	Timeout time.Duration
}

// Open returns a Transport for the SES v2 API. It loads the AWS
// configuration (or uses the static credentials of opts) and fails when no
// region is known or an option is malformed; it does not contact SES, and
// credentials are resolved at the first Send. A nil opts means the zero
// Options. Errors never contain the secret access key.
func Open(ctx context.Context, opts *Options) (*Transport, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if (o.AccessKeyID == "") != (o.SecretAccessKey == "") {
		return nil, errors.New("ses: give both an access key id and a secret access key, or neither to use the AWS credential chain")
	}
	if o.Region != "" && !validRegion(o.Region) {
		return nil, fmt.Errorf("ses: region %q is not a region name like eu-west-1", o.Region)
	}
	if o.Endpoint != "" {
		if _, err := urlopt.Endpoint(o.Endpoint); err != nil {
			return nil, fmt.Errorf("ses: %w", err)
		}
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("ses: timeout %v is negative", o.Timeout)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	cfg, err := loadConfig(ctx, &o)
	if err != nil {
		return nil, err
	}
	// The AWS configuration's transport keeps settings such as a custom CA
	// bundle (AWS_CA_BUNDLE).
	var base *http.Transport
	if bc, ok := cfg.HTTPClient.(*awshttp.BuildableClient); ok {
		base = bc.GetTransport()
	}
	hc := httpapi.NewClient(base)
	client := sesv2.NewFromConfig(cfg, func(so *sesv2.Options) {
		// One request per Send: the queue owns retries.
		so.Retryer = aws.NopRetryer{}
		so.RetryMaxAttempts = 0
		so.HTTPClient = hc.HTTP
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
	})
	return &Transport{
		client:  client,
		creds:   cfg.Credentials,
		http:    hc,
		confSet: o.ConfigurationSet,
		timeout: o.Timeout,
	}, nil
}

// Transport sends mail through the Amazon SES v2 SendEmail API as raw MIME.
// It is safe for concurrent use; open it with Open or URLOpener.
type Transport struct {
	client  *sesv2.Client
	creds   aws.CredentialsProvider
	http    *httpapi.Client
	confSet string
	timeout time.Duration
}

// Send renders m as MIME and makes one SendEmail request for its one
// recipient, bounded by ctx and the transport's timeout. On success the
// Receipt's MessageID is the SES MessageId. Every failure is a
// *transport.Error as the package documentation lists; an invalid m is
// Permanent and never reaches the wire. When m.MessageID is empty a fresh
// one is used for the Message-ID header (see render.Msg for the MIME form).
func (t *Transport) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	if err := t.http.CheckOpen(); err != nil {
		return transport.Receipt{}, err
	}
	// SES does not take SMTPUTF8: addresses must be 7-bit ASCII, with
	// internationalized domains as A-labels (Punycode).
	a, err := render.ASCII(m)
	if te := render.Unwritable(err, "SES"); te != nil {
		return transport.Receipt{}, te
	}
	if err != nil {
		return transport.Receipt{}, &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeMessage, Err: err}
	}
	if n := m.EncodedSize(); n > MaxMessageSize {
		return transport.Receipt{}, &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeMessage, Enhanced: "5.3.4", Rule: "ses-size",
			Detail: fmt.Sprintf("message of %d bytes encoded is over the SES limit of %d", n, MaxMessageSize)}
	}
	raw, err := render.MIME(a)
	if err != nil {
		// An invalid message (ErrInvalidMessage in the chain) never reaches the wire.
		return transport.Receipt{}, &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeMessage, Rule: "invalid-message", Err: err}
	}

	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	// Resolving credentials first keeps a missing or broken credential
	// chain apart from failures on the wire: it is our setup, not the mail.
	if _, err := t.creds.Retrieve(ctx); err != nil {
		return transport.Receipt{}, &transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane, Rule: "ses-credentials", Detail: "no usable AWS credentials", Err: err}
	}
	ctx, wrote := httpapi.TraceWrite(ctx)
	in := &sesv2.SendEmailInput{
		FromEmailAddress: aws.String(a.From.Address),
		Destination:      &types.Destination{ToAddresses: []string{a.To.Address}},
		Content:          &types.EmailContent{Raw: &types.RawMessage{Data: raw}},
	}
	if t.confSet != "" {
		in.ConfigurationSetName = aws.String(t.confSet)
	}
	if a.ReturnPath != "" {
		// SES sends from its own MAIL FROM domain; what it offers is to
		// forward the bounces and complaints it receives to this address
		// (which must be a verified identity, or in a verified domain).
		in.FeedbackForwardingEmailAddress = aws.String(a.ReturnPath)
	}
	out, err := t.client.SendEmail(ctx, in)
	if err != nil {
		return transport.Receipt{}, classifySendError(err, wrote(), time.Now())
	}
	if out.MessageId == nil || *out.MessageId == "" {
		return transport.Receipt{}, &transport.Error{Kind: transport.Temporary, Scope: transport.ScopeTransient, Code: http.StatusOK, MaybeDelivered: true, Rule: "ses-unreadable-answer",
			Detail: "accepted without a MessageId"}
	}
	return transport.Receipt{MessageID: *out.MessageId}, nil
}

// Close releases idle connections. It is idempotent; Send after Close
// fails with transport.ErrClosed in its chain.
func (t *Transport) Close() error {
	t.http.Close()
	return nil
}

var _ transport.Transport = (*Transport)(nil)

package ses

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"

	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/internal/render"
)

// ErrClosed is in the chain of the error Send returns after Close.
var ErrClosed = errors.New("ses: transport is closed")

// Transport sends mail through the Amazon SES v2 SendEmail API as raw MIME.
// It is safe for concurrent use; open it with Open or URLOpener.
type Transport struct {
	client  *sesv2.Client
	creds   aws.CredentialsProvider
	http    *http.Client
	confSet string
	timeout time.Duration
	closed  atomic.Bool
}

// Send renders m as MIME and makes one SendEmail request for its one
// recipient, bounded by ctx and the transport's timeout. On success the
// Receipt's MessageID is the SES MessageId. Every failure is a
// *transport.Error as the package documentation lists; an invalid m is
// Permanent and never reaches the wire. When m.MessageID is empty a fresh
// one is used for the Message-ID header (see render.Msg for the MIME form).
func (t *Transport) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	if t.closed.Load() {
		return transport.Receipt{}, &transport.Error{Kind: transport.Connection, Err: ErrClosed}
	}
	// SES does not take SMTPUTF8: addresses must be 7-bit ASCII, with
	// internationalized domains as A-labels (Punycode).
	a, err := render.ASCII(m)
	if err != nil {
		return transport.Receipt{}, &transport.Error{Kind: transport.Permanent, Err: err}
	}
	raw, err := render.MIME(a)
	if err != nil {
		// An invalid message (ErrInvalidMessage in the chain) never reaches the wire.
		return transport.Receipt{}, &transport.Error{Kind: transport.Permanent, Err: err}
	}

	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	// Resolving credentials first keeps a missing or broken credential
	// chain apart from failures on the wire: it is our setup, not the mail.
	if _, err := t.creds.Retrieve(ctx); err != nil {
		return transport.Receipt{}, &transport.Error{Kind: transport.Connection, Detail: "no usable AWS credentials", Err: err}
	}
	// wrote is set once the whole request, body included, went out: from
	// then on a missing answer may hide an accepted mail.
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) {
			if i.Err == nil {
				wrote.Store(true)
			}
		},
	})
	in := &sesv2.SendEmailInput{
		FromEmailAddress: aws.String(a.From.Address),
		Destination:      &types.Destination{ToAddresses: []string{a.To.Address}},
		Content:          &types.EmailContent{Raw: &types.RawMessage{Data: raw}},
	}
	if t.confSet != "" {
		in.ConfigurationSetName = aws.String(t.confSet)
	}
	out, err := t.client.SendEmail(ctx, in)
	if err != nil {
		return transport.Receipt{}, classifySendError(err, wrote.Load(), time.Now())
	}
	if out.MessageId == nil || *out.MessageId == "" {
		return transport.Receipt{}, &transport.Error{Kind: transport.Temporary, Code: http.StatusOK, MaybeDelivered: true,
			Detail: "accepted without a MessageId"}
	}
	return transport.Receipt{MessageID: *out.MessageId}, nil
}

// Close releases idle connections. It is idempotent; Send after Close
// fails with ErrClosed in its chain.
func (t *Transport) Close() error {
	t.closed.Store(true)
	t.http.CloseIdleConnections()
	return nil
}

var _ transport.Transport = (*Transport)(nil)

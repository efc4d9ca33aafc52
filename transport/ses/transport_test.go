package ses_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"net/mail"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/conformance"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/ses"
)

// Static test credentials; the fake checks the key id in the signature.
const (
	testKeyID  = "AKIATESTKEY0000001"
	testSecret = "test-secret-0123456789abcdefghijklmnopq"
)

// openStatic opens a transport with static credentials against endpoint;
// extra adds query parameters.
func openStatic(t *testing.T, endpoint string, extra url.Values) transport.Transport {
	t.Helper()
	q := url.Values{"region": {"eu-west-1"}, "endpoint": {endpoint}, "timeout": {"10s"}}
	for k, v := range extra {
		q[k] = v
	}
	u := &url.URL{Scheme: "ses", User: url.UserPassword(testKeyID, testSecret), Host: "default", RawQuery: q.Encode()}
	tr, err := ses.URLOpener{}.OpenTransportURL(context.Background(), u)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

func testMessage() *transport.Message {
	return &transport.Message{
		MessageID: "order-42.1@shop.example.com",
		From:      mail.Address{Name: "Shop", Address: "shop@example.com"},
		To:        mail.Address{Name: "Jörg", Address: "joerg@example.net"},
		ReplyTo:   mail.Address{Address: "support@example.com"},
		Subject:   "Your order",
		Text:      "It ships today.",
		HTML:      "<p>It ships today.</p>",
		Headers: []transport.Header{
			{Name: "List-Unsubscribe", Value: "<https://example.com/u/abc>"},
			{Name: "X-Campaign", Value: "orders"},
		},
	}
}

func TestSendRequest(t *testing.T) {
	t.Parallel()
	id := newMessageID()
	f := newFakeSES(t, func(w http.ResponseWriter, _ *http.Request) { writeMessageID(w, id) })
	tr := openStatic(t, f.srv.URL, url.Values{"configuration_set": {"transactional"}})

	rc, err := tr.Send(context.Background(), testMessage())
	require.NoError(t, err)
	assert.Equal(t, id, rc.MessageID, "Receipt.MessageID is the SES MessageId")

	reqs := f.Requests()
	require.Len(t, reqs, 1)
	req := reqs[0]
	assert.Equal(t, testKeyID, req.AccessKeyID)
	assert.Equal(t, "eu-west-1", req.Region)
	assert.Equal(t, "transactional", req.ConfigurationSetName)
	assert.Equal(t, "shop@example.com", req.FromEmailAddress)
	assert.Equal(t, []string{"joerg@example.net"}, req.Destination.ToAddresses)

	got, err := conformance.ParseMIME(req.Content.Raw.Data)
	require.NoError(t, err)
	assert.Equal(t, "<order-42.1@shop.example.com>", got.Header.Get("Message-Id"))
	assert.Equal(t, "<https://example.com/u/abc>", got.Header.Get("List-Unsubscribe"))
	assert.Equal(t, "orders", got.Header.Get("X-Campaign"))
	assert.Contains(t, got.Header.Get("Reply-To"), "support@example.com")
	assert.Equal(t, "Your order", got.Subject)
	assert.Equal(t, "It ships today.", strings.TrimRight(got.Text, "\n"))
	assert.Equal(t, "<p>It ships today.</p>", strings.TrimRight(got.HTML, "\n"))
}

// TestSendReturnPath: SES keeps its own MAIL FROM; a message's return
// path becomes the address SES forwards its bounces and complaints to.
func TestSendReturnPath(t *testing.T) {
	t.Parallel()
	f := newFakeSES(t, func(w http.ResponseWriter, _ *http.Request) { writeMessageID(w, newMessageID()) })
	tr := openStatic(t, f.srv.URL, nil)
	m := testMessage()
	m.ReturnPath = "bounces+news.42.abcdefghij@bounces.example.com"
	_, err := tr.Send(context.Background(), m)
	require.NoError(t, err)
	_, err = tr.Send(context.Background(), testMessage())
	require.NoError(t, err)
	reqs := f.Requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, m.ReturnPath, reqs[0].FeedbackForwardingEmailAddress)
	assert.Empty(t, reqs[1].FeedbackForwardingEmailAddress)
}

func TestSendWithoutConfigurationSetOmitsIt(t *testing.T) {
	t.Parallel()
	f := newFakeSES(t, func(w http.ResponseWriter, _ *http.Request) { writeMessageID(w, newMessageID()) })
	tr := openStatic(t, f.srv.URL, nil)
	_, err := tr.Send(context.Background(), testMessage())
	require.NoError(t, err)
	require.Len(t, f.Requests(), 1)
	assert.Empty(t, f.Requests()[0].ConfigurationSetName)
}

func TestSendGeneratesMessageID(t *testing.T) {
	t.Parallel()
	f := newFakeSES(t, func(w http.ResponseWriter, _ *http.Request) { writeMessageID(w, newMessageID()) })
	tr := openStatic(t, f.srv.URL, nil)
	m := testMessage()
	m.MessageID = ""
	_, err := tr.Send(context.Background(), m)
	require.NoError(t, err)
	assert.Empty(t, m.MessageID, "Send must not modify the caller's message")

	require.Len(t, f.Requests(), 1)
	got, err := conformance.ParseMIME(f.Requests()[0].Content.Raw.Data)
	require.NoError(t, err)
	assert.Regexp(t, `^<[0-9a-f]{32}@example\.com>$`, got.Header.Get("Message-Id"))
}

func TestSendInvalidMessageIsPermanentAndNotSent(t *testing.T) {
	t.Parallel()
	f := newFakeSES(t, func(w http.ResponseWriter, _ *http.Request) { writeMessageID(w, newMessageID()) })
	tr := openStatic(t, f.srv.URL, nil)
	m := testMessage()
	m.Subject = "hi\r\nBcc: victim@example.org"
	_, err := tr.Send(context.Background(), m)
	require.Error(t, err)
	assert.Equal(t, transport.Permanent, transport.KindOf(err))
	assert.ErrorIs(t, err, transport.ErrInvalidMessage)
	assert.Empty(t, f.Requests())
}

func TestSendIsOneRequest(t *testing.T) {
	t.Parallel()
	// The SDK's default retryer would try these three times.
	for _, tc := range []struct {
		status int
		code   string
	}{
		{http.StatusInternalServerError, "InternalFailure"},
		{http.StatusServiceUnavailable, "ServiceUnavailable"},
		{http.StatusTooManyRequests, "TooManyRequestsException"},
		{http.StatusBadRequest, "Throttling"},
	} {
		t.Run(tc.code, func(t *testing.T) {
			f := newFakeSES(t, func(w http.ResponseWriter, _ *http.Request) {
				writeSESError(w, tc.status, tc.code, "try later")
			})
			tr := openStatic(t, f.srv.URL, nil)
			_, err := tr.Send(context.Background(), testMessage())
			assert.Equal(t, transport.Temporary, transport.KindOf(err), "%v", err)
			assert.Len(t, f.Requests(), 1)
		})
	}
}

func TestSendStallAfterBodyIsMaybeDelivered(t *testing.T) {
	t.Parallel()
	received := make(chan struct{})
	f := newFakeSES(t, func(_ http.ResponseWriter, r *http.Request) {
		close(received) // the fake has read the whole body
		<-r.Context().Done()
	})
	tr := openStatic(t, f.srv.URL, nil)
	// The caller gives up once the whole request has arrived and the
	// client has noted it as written, however long either took on a busy
	// machine. The transport's WroteRequest hook is added on top of ours,
	// so httptrace runs it first: its flag is set before wrote closes.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wrote := make(chan struct{})
	var once sync.Once
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { once.Do(func() { close(wrote) }) },
	})
	go func() {
		<-received
		<-wrote
		cancel()
	}()
	_, err := tr.Send(ctx, testMessage())
	var te *transport.Error
	require.ErrorAs(t, err, &te)
	assert.Equal(t, transport.Temporary, te.Kind)
	assert.True(t, te.MaybeDelivered, "the whole request was sent: %v", err)
	assert.Len(t, f.Requests(), 1)
}

func TestSendTimeoutOption(t *testing.T) {
	release := make(chan struct{})
	f := newFakeSES(t, func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	// 1.5s leaves a busy machine time to write the whole request before
	// the timeout (as the conformance suite's stallDeadline does); an
	// ignored option would mean openStatic's 10s, past the 5s below.
	tr := openStatic(t, f.srv.URL, url.Values{"timeout": {"1500ms"}})
	done := make(chan error, 1)
	go func() {
		_, err := tr.Send(context.Background(), testMessage())
		done <- err
	}()
	select {
	case err := <-done:
		var te *transport.Error
		require.ErrorAs(t, err, &te)
		assert.True(t, te.MaybeDelivered, "%v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("Send did not give up after its timeout")
	}
}

func TestSendCancelledBeforeRequestIsNotMaybeDelivered(t *testing.T) {
	t.Parallel()
	f := newFakeSES(t, func(w http.ResponseWriter, _ *http.Request) { writeMessageID(w, newMessageID()) })
	tr := openStatic(t, f.srv.URL, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := tr.Send(ctx, testMessage())
	require.Error(t, err)
	assert.NotEqual(t, transport.Sent, transport.KindOf(err))
	var te *transport.Error
	if errors.As(err, &te) {
		assert.False(t, te.MaybeDelivered, "%v", err)
	}
	assert.Empty(t, f.Requests())
}

func TestSendAfterClose(t *testing.T) {
	t.Parallel()
	f := newFakeSES(t, func(w http.ResponseWriter, _ *http.Request) { writeMessageID(w, newMessageID()) })
	tr := openStatic(t, f.srv.URL, nil)
	require.NoError(t, tr.Close())
	require.NoError(t, tr.Close(), "Close is idempotent")
	_, err := tr.Send(context.Background(), testMessage())
	assert.ErrorIs(t, err, transport.ErrClosed)
	assert.Equal(t, transport.Connection, transport.KindOf(err))
	assert.Empty(t, f.Requests())
}

// TestSendInternationalizedAddresses: SES takes 7-bit ASCII addresses only,
// so an internationalized domain goes out as its A-label (in the
// destination and in the MIME), and a local part that is not ASCII is
// Permanent and never reaches the wire.
func TestSendInternationalizedAddresses(t *testing.T) {
	f := newFakeSES(t, func(w http.ResponseWriter, _ *http.Request) { writeMessageID(w, newMessageID()) })
	tr := openStatic(t, f.srv.URL, nil)
	m := testMessage()
	m.To.Address = "b@bücher.example"
	_, err := tr.Send(context.Background(), m)
	require.NoError(t, err)
	require.Len(t, f.Requests(), 1)
	assert.Equal(t, []string{"b@xn--bcher-kva.example"}, f.Requests()[0].Destination.ToAddresses)
	assert.NotContains(t, string(f.Requests()[0].Content.Raw.Data), "bücher")

	m.To.Address = "jürgen@example.com"
	_, err = tr.Send(context.Background(), m)
	assert.Equal(t, transport.Permanent, transport.KindOf(err))
	assert.ErrorContains(t, err, "SMTPUTF8")
	assert.Len(t, f.Requests(), 1)

	// Our own address so: the lane's sender, not this mail.
	m.To.Address, m.From.Address = "b@example.com", "bücher@example.com"
	_, err = tr.Send(context.Background(), m)
	assert.Equal(t, transport.Temporary, transport.KindOf(err))
	assert.Equal(t, transport.ScopeSender, transport.ScopeOf(err))
	assert.ErrorContains(t, err, "SMTPUTF8")
	assert.Len(t, f.Requests(), 1)
}

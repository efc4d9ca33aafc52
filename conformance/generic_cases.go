package conformance

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailspool/mailspool/transport"
)

// genericCases run on the Accept scenario (and, where they say so, on
// failing scenarios too), in this order.
var genericCases = []struct {
	name string
	run  func(t *testing.T, e *env)
}{
	{"one-attempt-per-send", oneAttemptPerSend},
	{"cancelled-context", cancelledContext},
	{"concurrent-send", concurrentSend},
	{"close", closeCase},
	{"intact-content", intactContent},
	{"attachments", attachmentsIntact},
	{"receipt-message-id", receiptMessageID},
	{"no-secret-in-errors", noSecretInErrors},
}

// mustSend sends m and fails t unless the outcome is Sent.
func mustSend(t *testing.T, e *env, tr transport.Transport, m *transport.Message) transport.Receipt {
	t.Helper()
	r, err := e.send(t, tr, m, 0)
	if err != nil {
		e.fatalf(t, "Send: %v (kind %s), want Sent", err, transport.KindOf(err))
	}
	return r
}

// oneAttemptPerSend: three sends are three attempts; a failing send (451
// after DATA, or HTTP 500) is exactly one, never a retry.
func oneAttemptPerSend(t *testing.T, e *env) {
	tr := e.open(t, Accept)
	for i := range 3 {
		mustSend(t, e, tr, testMessage(fmt.Sprintf("one-attempt-per-send %d", i)))
	}
	if n := e.h.Attempts(); n != 3 {
		e.errorf(t, "Attempts() = %d after 3 sends, want 3", n)
	}
	for _, sc := range []Scenario{SMTP451, HTTP500} {
		fe := e.s.env(t)
		ftr, _, ok := fe.tryOpen(t, sc)
		if !ok {
			continue
		}
		_, err := fe.send(t, ftr, testMessage("one-attempt-per-send "+string(sc)), 0)
		if err == nil {
			fe.fatalf(t, "%s: Send succeeded, want an error", sc)
		}
		if n := fe.h.Attempts(); n != 1 {
			fe.errorf(t, "%s: Attempts() = %d after one failing Send, want exactly 1", sc, n)
		}
		return
	}
	t.Logf("the harness supports neither %s nor %s: only successful sends were counted", SMTP451, HTTP500)
}

// cancelledContext: a Send with an already cancelled context returns
// promptly with an error and does not report Sent.
func cancelledContext(t *testing.T, e *env) {
	tr := e.open(t, Accept)
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	start := time.Now()
	_, err := tr.Send(ctx, testMessage("cancelled-context"))
	if took := time.Since(start); took > grace {
		e.errorf(t, "Send with a cancelled context returned after %v, want within %v", took.Round(time.Millisecond), grace)
	}
	if err == nil {
		e.fatalf(t, "Send with a cancelled context succeeded, want an error")
	}
	if k := transport.KindOf(err); k == transport.Permanent {
		e.errorf(t, "KindOf = %s for a cancelled context, want Temporary or Connection: the mail is fine (error: %v)", k, err)
	}
}

// concurrentSend: 8 goroutines × 4 sends on one transport, all Sent, 32
// attempts, 32 distinct receipt ids (run it with -race).
func concurrentSend(t *testing.T, e *env) {
	const goroutines, perGoroutine = 8, 4
	tr := e.open(t, Accept)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		ids  []string
		errs []error
	)
	for g := range goroutines {
		wg.Go(func() {
			for i := range perGoroutine {
				r, err := tr.Send(e.ctx, testMessage(fmt.Sprintf("concurrent-send %d.%d", g, i)))
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("send %d.%d: %w (kind %s)", g, i, err, transport.KindOf(err)))
				} else {
					ids = append(ids, r.MessageID)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		e.errorf(t, "%s", err)
	}
	const total = goroutines * perGoroutine
	if n := e.h.Attempts(); n != total {
		e.errorf(t, "Attempts() = %d after %d sends, want %d", n, total, total)
	}
	slices.Sort(ids)
	if i := slices.Index(ids, ""); i >= 0 {
		e.errorf(t, "a Receipt.MessageID is empty")
	}
	if len(slices.Compact(slices.Clone(ids))) != len(ids) {
		e.errorf(t, "Receipt.MessageIDs are not distinct: %q", ids)
	}
	if rs, ok := e.received(t); ok && len(rs) != total {
		e.errorf(t, "the backend received %d mails, want %d", len(rs), total)
	}
}

// closeCase: Close returns nil, a second Close returns nil too (Close is
// idempotent), and Send after Close fails promptly without reaching the
// wire, as Connection with transport.ErrClosed in the chain (the mail is
// fine).
func closeCase(t *testing.T, e *env) {
	tr := e.open(t, Accept)
	mustSend(t, e, tr, testMessage("close"))
	if err := tr.Close(); err != nil {
		e.errorf(t, "Close: %v, want nil", err)
	}
	if err := tr.Close(); err != nil {
		e.errorf(t, "second Close: %v, want nil: Close is idempotent", err)
	}
	before := e.h.Attempts()
	_, err := e.send(t, tr, testMessage("close: send after close"), hangDeadline)
	if err == nil {
		e.fatalf(t, "Send after Close succeeded, want an error")
	}
	if k := transport.KindOf(err); k != transport.Connection {
		e.errorf(t, "KindOf = %s for Send after Close, want connection: the mail is fine (error: %v)", k, err)
	}
	if !errors.Is(err, transport.ErrClosed) {
		e.errorf(t, "Send after Close: %v, want transport.ErrClosed in the chain", err)
	}
	if n := e.h.Attempts(); n != before {
		e.errorf(t, "Send after Close reached the wire: Attempts() went from %d to %d", before, n)
	}
}

// intactContent: the backend receives the message field by field as sent.
func intactContent(t *testing.T, e *env) {
	tr := e.open(t, Accept)
	if _, ok := e.received(t); !ok {
		t.Skip("the harness cannot show received mail")
	}
	m := intactMessage()
	if err := m.Validate(); err != nil {
		e.fatalf(t, "conformance: the intact-content message is invalid: %v", err)
	}
	mustSend(t, e, tr, m)
	rs, _ := e.received(t)
	if len(rs) != 1 {
		e.fatalf(t, "the backend received %d mails, want 1", len(rs))
	}
	for _, d := range compareReceived(m, rs[0]) {
		e.errorf(t, "%s", d)
	}
}

// attachmentsIntact: the backend receives every attachment with its bytes,
// file name (RFC 2231 in MIME, never an encoded word in a parameter), type,
// disposition and content ID, and the bodies beside them.
func attachmentsIntact(t *testing.T, e *env) {
	tr := e.open(t, Accept)
	if _, ok := e.received(t); !ok {
		t.Skip("the harness cannot show received mail")
	}
	m := attachmentMessage()
	if err := m.Validate(); err != nil {
		e.fatalf(t, "conformance: the attachments message is invalid: %v", err)
	}
	mustSend(t, e, tr, m)
	rs, _ := e.received(t)
	if len(rs) != 1 {
		e.fatalf(t, "the backend received %d mails, want 1", len(rs))
	}
	if got, want := strings.TrimRight(rs[0].HTML, "\n"), m.HTML; got != want {
		e.errorf(t, "HTML: got %q, want %q", got, want)
	}
	if got, want := strings.TrimRight(rs[0].Text, "\n"), strings.TrimRight(m.Text, "\n"); got != want {
		e.errorf(t, "Text: got %q, want %q", got, want)
	}
	for _, d := range compareAttachments(m.Attachments, rs[0].Attachments) {
		e.errorf(t, "%s", d)
	}
}

// receiptMessageID: every Send returns a non-empty Receipt.MessageID; Send
// does not modify the caller's message; a set MessageID reaches the backend
// as the Message-ID header on every send (retries keep their id), and an
// empty one makes the adapter generate a header.
func receiptMessageID(t *testing.T, e *env) {
	tr := e.open(t, Accept)
	m := testMessage("receipt-message-id")
	m.MessageID = transport.NewMessageID(m.From.Address)
	m.Headers = []transport.Header{{Name: "X-Mailspool-Test", Value: "receipt-message-id"}}
	unset := testMessage("receipt-message-id without id")
	for i, msg := range []*transport.Message{m, m, unset} {
		before := *msg
		before.Headers = slices.Clone(msg.Headers)
		r := mustSend(t, e, tr, msg)
		if r.MessageID == "" {
			e.errorf(t, "send %d: Receipt.MessageID is empty", i+1)
		}
		if !reflect.DeepEqual(*msg, before) {
			e.errorf(t, "send %d: Send modified the caller's message: got %+v, want %+v", i+1, *msg, before)
		}
	}
	rs, ok := e.received(t)
	if !ok {
		return
	}
	if len(rs) != 3 {
		e.fatalf(t, "the backend received %d mails, want 3", len(rs))
	}
	for i, r := range rs[:2] {
		if got, want := r.Header.Get("Message-Id"), "<"+m.MessageID+">"; got != want {
			e.errorf(t, "mail %d: Message-Id header %q, want %q on every send of the message", i+1, got, want)
		}
	}
	if rs[2].Header.Get("Message-Id") == "" {
		e.errorf(t, "a message without MessageID arrived without a Message-Id header, want a generated one")
	}
}

// noSecretInErrors: for every failing scenario the harness supports, the
// error text and Details do not contain the harness's secret.
func noSecretInErrors(t *testing.T, e *env) {
	secret := e.h.Secret()
	if secret == "" {
		t.Skip("the harness gives the transport no secret")
	}
	for _, sc := range Scenarios {
		if sc == Accept {
			continue
		}
		t.Run(string(sc), func(t *testing.T) {
			se := e.s.env(t)
			tr := se.open(t, sc)
			d := expected[sc].deadline
			if d > hangDeadline {
				d = hangDeadline
			}
			_, err := se.send(t, tr, testMessage("no-secret-in-errors "+string(sc)), d)
			if err == nil {
				se.fatalf(t, "Send succeeded in scenario %s, want an error", sc)
			}
			for _, l := range leaks(err, se.h.Secret()) {
				se.errorf(t, "%s", l)
			}
		})
	}
}

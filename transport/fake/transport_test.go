package fake

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/transport"
)

// sendKinds sends n messages to the address to and returns their kinds.
func sendKinds(t *testing.T, tr *Transport, to string, n int) []transport.Kind {
	t.Helper()
	var got []transport.Kind
	for range n {
		_, err := tr.Send(context.Background(), testMessage(to))
		got = append(got, transport.KindOf(err))
	}
	return got
}

func TestScriptLastStepRepeats(t *testing.T) {
	t.Parallel()
	tr := New(&Options{Script: []string{"421", "ok", "550"}})
	got := sendKinds(t, tr, "rcpt@example.net", 5)
	want := []transport.Kind{transport.Temporary, transport.Sent, transport.Permanent, transport.Permanent, transport.Permanent}
	assert.Equal(t, want, got, "kinds")
}

func TestScriptCycle(t *testing.T) {
	t.Parallel()
	tr := New(&Options{Script: []string{"421", "ok", "550"}, Cycle: true})
	got := sendKinds(t, tr, "rcpt@example.net", 5)
	want := []transport.Kind{transport.Temporary, transport.Sent, transport.Permanent, transport.Temporary, transport.Sent}
	assert.Equal(t, want, got, "kinds")
}

func TestNewPanicsOnUnknownStep(t *testing.T) {
	t.Parallel()
	defer func() {
		err, ok := recover().(error)
		require.True(t, ok, "New did not panic with an error")
		assert.ErrorContains(t, err, `fake: unknown step "4211"`)
	}()
	New(&Options{Script: []string{"ok", "4211"}})
}

func TestReceiptMessageID(t *testing.T) {
	t.Parallel()
	tr := New(nil)
	m := testMessage("rcpt@example.net")
	r, err := tr.Send(context.Background(), m)
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(r.MessageID, "@example.com"), "generated MessageID %q, want one in the sender's domain", r.MessageID)
	assert.Empty(t, m.MessageID, "Send set the caller's MessageID")
	sent := tr.Sent()
	if assert.Len(t, sent, 1, "Sent()") {
		assert.Equal(t, r.MessageID, sent[0].MessageID, "Sent(): the message with the receipt's id")
	}
	m.MessageID = "order-42@example.com"
	r, _ = tr.Send(context.Background(), m)
	assert.Equal(t, m.MessageID, r.MessageID, "Receipt.MessageID is the message's")
}

func TestRecipientTags(t *testing.T) {
	t.Parallel()
	tr := New(&Options{Recipient: true, Script: []string{"ok", "451"}, Timeout: 10 * time.Millisecond})
	for _, c := range []struct {
		to   string
		want transport.Kind
	}{
		{"jane+550@example.com", transport.Permanent},
		{"jane+http-429@example.com", transport.Temporary},
		{"jane+timeout@example.com", transport.Connection},
		{"jane@example.com", transport.Sent},                 // script step 1: tagged sends do not consume it
		{"jane+newsletter@example.com", transport.Temporary}, // not a step: script step 2
		{"jane+550@example.com", transport.Permanent},
	} {
		_, err := tr.Send(context.Background(), testMessage(c.to))
		assert.Equal(t, c.want, transport.KindOf(err), "%s: KindOf (err: %v)", c.to, err)
	}
}

func TestRecords(t *testing.T) {
	t.Parallel()
	tr := New(&Options{Script: []string{"ok", "550", "ok"}})
	m := testMessage("rcpt@example.net")
	m.Headers = []transport.Header{{Name: "X-Campaign", Value: "spring"}}
	for range 3 {
		_, _ = tr.Send(context.Background(), m)
	}
	m.Headers[0].Value = "changed by the caller"
	assert.Equal(t, 3, tr.Attempts(), "Attempts()")
	msgs, sent := tr.Messages(), tr.Sent()
	require.Len(t, msgs, 3, "Messages()")
	require.Len(t, sent, 2, "Sent()")
	assert.Equal(t, "spring", sent[0].Headers[0].Value, "recorded header: the value at Send time")
	sent[0].Headers[0].Value = "changed by the reader"
	msgs[0].Subject = "changed by the reader"
	assert.Equal(t, "spring", tr.Sent()[0].Headers[0].Value, "changing what Sent returned changed the records")
	assert.Equal(t, m.Subject, tr.Messages()[0].Subject, "changing what Messages returned changed the records")
	tr.Reset()
	assert.Zero(t, tr.Attempts(), "Reset left attempts behind")
	assert.Empty(t, tr.Sent(), "Reset left Sent behind")
	assert.Empty(t, tr.Messages(), "Reset left Messages behind")
	_, err := tr.Send(context.Background(), m)
	assert.NoError(t, err, "first Send after Reset: want the script's first step (ok)")
}

func TestDiscardKeepsNoCopies(t *testing.T) {
	tr := New(&Options{Script: []string{"ok", "550", "ok"}, Discard: true})
	for range 3 {
		_, _ = tr.Send(context.Background(), testMessage("rcpt@example.net"))
	}
	if n := tr.Attempts(); n != 3 {
		t.Errorf("Attempts() = %d, want 3", n)
	}
	if len(tr.Messages()) != 0 || len(tr.Sent()) != 0 {
		t.Errorf("Discard kept %d messages and %d sent, want none", len(tr.Messages()), len(tr.Sent()))
	}
}

func TestFailuresBeforeAnAttempt(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	invalid := testMessage("not an address")

	tr := New(nil)
	_, err := tr.Send(cancelled, testMessage("rcpt@example.net"))
	assert.Error(t, err, "cancelled context")
	assert.Contains(t, []transport.Kind{transport.Temporary, transport.Connection}, transport.KindOf(err), "cancelled context: kind of %v", err)
	_, err = tr.Send(context.Background(), invalid)
	assert.ErrorIs(t, err, transport.ErrInvalidMessage, "invalid message")
	assert.Equal(t, transport.Permanent, transport.KindOf(err), "invalid message: kind of %v", err)
	require.NoError(t, tr.Close())
	assert.NoError(t, tr.Close(), "second Close")
	_, err = tr.Send(context.Background(), testMessage("rcpt@example.net"))
	assert.ErrorIs(t, err, transport.ErrClosed, "after Close")
	assert.Equal(t, transport.Connection, transport.KindOf(err), "after Close: kind of %v", err)
	assert.Zero(t, tr.Attempts(), "Attempts(): none of these reached a step")
}

func TestHangEnds(t *testing.T) {
	t.Parallel()
	t.Run("context", func(t *testing.T) {
		tr := New(&Options{Script: []string{"hang"}})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := tr.Send(ctx, testMessage("rcpt@example.net"))
		assert.Equal(t, transport.Connection, transport.KindOf(err), "kind of %v", err)
		assert.ErrorContains(t, err, "i/o timeout")
	})
	t.Run("timeout", func(t *testing.T) {
		tr := New(&Options{Script: []string{"stall"}, Timeout: 20 * time.Millisecond})
		_, err := tr.Send(context.Background(), testMessage("rcpt@example.net"))
		var te *transport.Error
		require.ErrorAs(t, err, &te)
		assert.Equal(t, transport.Temporary, te.Kind, "kind of %v", err)
		assert.True(t, te.MaybeDelivered, "maybe delivered: %v", err)
	})
	for _, step := range []string{"hang", "stall"} {
		t.Run("close/"+step, func(t *testing.T) {
			tr := New(&Options{Script: []string{step}, Timeout: time.Minute})
			done := make(chan error, 1)
			go func() {
				_, err := tr.Send(context.Background(), testMessage("rcpt@example.net"))
				done <- err
			}()
			for tr.Attempts() == 0 {
				time.Sleep(time.Millisecond)
			}
			require.NoError(t, tr.Close())
			select {
			case err := <-done:
				assert.Error(t, err, "Send returned nil after Close released it")
			case <-time.After(5 * time.Second):
				require.Fail(t, "Close did not release a Send blocked in the step")
			}
		})
	}
}

func TestLatency(t *testing.T) {
	t.Parallel()
	tr := New(&Options{Latency: 30 * time.Millisecond})
	start := time.Now()
	_, err := tr.Send(context.Background(), testMessage("rcpt@example.net"))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond, "Send took less than the latency")

	slow := New(&Options{Latency: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = slow.Send(ctx, testMessage("rcpt@example.net"))
	assert.Equal(t, transport.Connection, transport.KindOf(err), "context done during the latency: want a dial timeout (%v)", err)
	assert.Zero(t, slow.Attempts(), "Attempts(): the step was never reached")
}

func TestConcurrentSendsConsumeTheScriptOnce(t *testing.T) {
	t.Parallel()
	tr := New(&Options{Script: []string{"ok", "550"}, Cycle: true})
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		kinds = map[transport.Kind]int{}
	)
	for range 10 {
		wg.Go(func() {
			for range 10 {
				_, err := tr.Send(context.Background(), testMessage("rcpt@example.net"))
				mu.Lock()
				kinds[transport.KindOf(err)]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, map[transport.Kind]int{transport.Sent: 50, transport.Permanent: 50}, kinds, "kinds")
	assert.Equal(t, 100, tr.Attempts(), "attempts")
	assert.Len(t, tr.Sent(), 50, "sent")
}

func TestPanicStep(t *testing.T) {
	tr := New(&Options{Recipient: true})
	if _, err := tr.Send(context.Background(), testMessage("rcpt@example.net")); err != nil {
		t.Fatalf("untagged recipient: %v", err)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "panic step") {
			t.Errorf("recovered %v, want the panic step's panic", r)
		}
		if tr.Attempts() != 2 {
			t.Errorf("Attempts = %d, want 2 (the panicking send reached its step)", tr.Attempts())
		}
	}()
	_, _ = tr.Send(context.Background(), testMessage("poison+panic@example.net"))
	t.Error("Send returned; want a panic")
}

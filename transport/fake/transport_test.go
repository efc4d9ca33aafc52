package fake

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

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
	tr := New(&Options{Script: []string{"421", "ok", "550"}})
	got := sendKinds(t, tr, "rcpt@example.net", 5)
	want := []transport.Kind{transport.Temporary, transport.Sent, transport.Permanent, transport.Permanent, transport.Permanent}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("kinds = %v, want %v", got, want)
	}
}

func TestScriptCycle(t *testing.T) {
	tr := New(&Options{Script: []string{"421", "ok", "550"}, Cycle: true})
	got := sendKinds(t, tr, "rcpt@example.net", 5)
	want := []transport.Kind{transport.Temporary, transport.Sent, transport.Permanent, transport.Temporary, transport.Sent}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("kinds = %v, want %v", got, want)
	}
}

func TestNewPanicsOnUnknownStep(t *testing.T) {
	defer func() {
		r := recover()
		if err, ok := r.(error); !ok || !strings.Contains(err.Error(), `fake: unknown step "4211"`) {
			t.Errorf("recovered %v, want an unknown step error", r)
		}
	}()
	New(&Options{Script: []string{"ok", "4211"}})
}

func TestReceiptMessageID(t *testing.T) {
	tr := New(nil)
	m := testMessage("rcpt@example.net")
	r, err := tr.Send(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(r.MessageID, "@example.com") {
		t.Errorf("generated MessageID %q, want one in the sender's domain", r.MessageID)
	}
	if m.MessageID != "" {
		t.Errorf("Send set the caller's MessageID to %q", m.MessageID)
	}
	if sent := tr.Sent(); len(sent) != 1 || sent[0].MessageID != r.MessageID {
		t.Errorf("Sent() = %+v, want the message with the receipt's id %q", sent, r.MessageID)
	}
	m.MessageID = "order-42@example.com"
	if r, _ := tr.Send(context.Background(), m); r.MessageID != m.MessageID {
		t.Errorf("Receipt.MessageID = %q, want the message's %q", r.MessageID, m.MessageID)
	}
}

func TestRecipientTags(t *testing.T) {
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
		if got := transport.KindOf(err); got != c.want {
			t.Errorf("%s: KindOf = %s, want %s (err: %v)", c.to, got, c.want, err)
		}
	}
}

func TestRecords(t *testing.T) {
	tr := New(&Options{Script: []string{"ok", "550", "ok"}})
	m := testMessage("rcpt@example.net")
	m.Headers = []transport.Header{{Name: "X-Campaign", Value: "spring"}}
	for range 3 {
		_, _ = tr.Send(context.Background(), m)
	}
	m.Headers[0].Value = "changed by the caller"
	if n := tr.Attempts(); n != 3 {
		t.Errorf("Attempts() = %d, want 3", n)
	}
	msgs, sent := tr.Messages(), tr.Sent()
	if len(msgs) != 3 || len(sent) != 2 {
		t.Fatalf("len(Messages()) = %d, len(Sent()) = %d, want 3 and 2", len(msgs), len(sent))
	}
	if v := sent[0].Headers[0].Value; v != "spring" {
		t.Errorf("recorded header = %q, want the value at Send time", v)
	}
	sent[0].Headers[0].Value = "changed by the reader"
	msgs[0].Subject = "changed by the reader"
	if tr.Sent()[0].Headers[0].Value != "spring" || tr.Messages()[0].Subject != m.Subject {
		t.Error("changing what Sent or Messages returned changed the records")
	}
	tr.Reset()
	if tr.Attempts() != 0 || len(tr.Sent()) != 0 || len(tr.Messages()) != 0 {
		t.Error("Reset left records behind")
	}
	if _, err := tr.Send(context.Background(), m); err != nil {
		t.Errorf("first Send after Reset: %v, want the script's first step (ok)", err)
	}
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
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	invalid := testMessage("not an address")

	tr := New(nil)
	_, err := tr.Send(cancelled, testMessage("rcpt@example.net"))
	if k := transport.KindOf(err); err == nil || k == transport.Permanent {
		t.Errorf("cancelled context: err %v (kind %s), want Temporary or Connection", err, k)
	}
	_, err = tr.Send(context.Background(), invalid)
	if !errors.Is(err, transport.ErrInvalidMessage) || transport.KindOf(err) != transport.Permanent {
		t.Errorf("invalid message: err %v, want Permanent with the validation error", err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Errorf("second Close: %v, want nil", err)
	}
	_, err = tr.Send(context.Background(), testMessage("rcpt@example.net"))
	if !errors.Is(err, transport.ErrClosed) || transport.KindOf(err) != transport.Connection {
		t.Errorf("after Close: err %v, want Connection with ErrClosed", err)
	}
	if n := tr.Attempts(); n != 0 {
		t.Errorf("Attempts() = %d, want 0: none of these reached a step", n)
	}
}

func TestHangEnds(t *testing.T) {
	t.Run("context", func(t *testing.T) {
		tr := New(&Options{Script: []string{"hang"}})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := tr.Send(ctx, testMessage("rcpt@example.net"))
		if transport.KindOf(err) != transport.Connection || !strings.Contains(err.Error(), "i/o timeout") {
			t.Errorf("err = %v, want a Connection i/o timeout", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		tr := New(&Options{Script: []string{"stall"}, Timeout: 20 * time.Millisecond})
		_, err := tr.Send(context.Background(), testMessage("rcpt@example.net"))
		var te *transport.Error
		if !errors.As(err, &te) || te.Kind != transport.Temporary || !te.MaybeDelivered {
			t.Errorf("err = %v, want Temporary and maybe delivered", err)
		}
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
			if err := tr.Close(); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err == nil {
					t.Error("Send returned nil after Close released it")
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Close did not release a Send blocked in the step")
			}
		})
	}
}

func TestLatency(t *testing.T) {
	tr := New(&Options{Latency: 30 * time.Millisecond})
	start := time.Now()
	if _, err := tr.Send(context.Background(), testMessage("rcpt@example.net")); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Errorf("Send took %v, want at least the latency", took)
	}

	slow := New(&Options{Latency: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := slow.Send(ctx, testMessage("rcpt@example.net"))
	if transport.KindOf(err) != transport.Connection {
		t.Errorf("context done during the latency: err %v, want Connection (a dial timeout)", err)
	}
	if n := slow.Attempts(); n != 0 {
		t.Errorf("Attempts() = %d, want 0: the step was never reached", n)
	}
}

func TestConcurrentSendsConsumeTheScriptOnce(t *testing.T) {
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
	if kinds[transport.Sent] != 50 || kinds[transport.Permanent] != 50 || tr.Attempts() != 100 || len(tr.Sent()) != 50 {
		t.Errorf("kinds %v, %d attempts, %d sent; want 50 sent, 50 permanent, 100 attempts", kinds, tr.Attempts(), len(tr.Sent()))
	}
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

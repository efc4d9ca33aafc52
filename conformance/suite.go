package conformance

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mailspool/mailspool/transport"
)

// Timing of the suite. Bounds are generous: they catch an adapter that
// ignores its context, not a slow machine.
const (
	// caseWatchdog is how long one case may run before the watchdog dumps
	// every goroutine and panics.
	caseWatchdog = 30 * time.Second
	// caseDeadline bounds the context every case sends with.
	caseDeadline = 20 * time.Second
	// hangDeadline is the context deadline of a Send the backend never
	// answers (Hang, StallAfterData and the cancelled-context case).
	hangDeadline = time.Second
	// stallDeadline leaves the adapter time to hand the whole mail over
	// before the backend stalls.
	stallDeadline = 1500 * time.Millisecond
	// grace is how long after its deadline a Send may still return.
	grace = 2 * time.Second
)

// RunTransportTests runs the conformance suite against the adapter that
// newHarness drives. Every case is a parallel subtest with a stable name
// (see the package documentation), gets a fresh Harness, runs under a
// watchdog and sends with a context that has a deadline; newHarness is
// called from the cases' goroutines, so it must be safe for concurrent use. A case whose scenario the
// harness does not support is skipped with the harness's reason.
func RunTransportTests(t *testing.T, newHarness HarnessMaker) {
	t.Helper()
	s := &suite{newHarness: newHarness, watchdog: caseWatchdog}
	for _, sc := range Scenarios {
		s.run(t, string(sc), func(t *testing.T, e *env) { scenarioCase(t, e, sc) })
	}
	for _, c := range genericCases {
		s.run(t, c.name, c.run)
	}
}

// suite holds what every case needs to set itself up.
type suite struct {
	newHarness HarnessMaker
	watchdog   time.Duration
}

// env is one case's harness and context.
type env struct {
	s   *suite
	h   Harness
	ctx context.Context
}

// run runs body as the subtest name with a fresh harness, under the watchdog.
func (s *suite) run(t *testing.T, name string, body func(t *testing.T, e *env)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		stop := startWatchdog(t.Name(), s.watchdog)
		// Cleanups run last-in first-out: the watchdog also covers the
		// harness's and the transports' Close.
		t.Cleanup(stop)
		body(t, s.env(t))
	})
}

// env makes a fresh harness whose Close is a cleanup of t.
func (s *suite) env(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), caseDeadline)
	t.Cleanup(cancel)
	h, err := s.newHarness(ctx, t)
	if err != nil {
		t.Fatalf("conformance: new harness: %v", err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("conformance: harness Close: %v", err)
		}
	})
	return &env{s: s, h: h, ctx: ctx}
}

// startWatchdog panics with name, after printing every goroutine's stack,
// unless the returned stop is called within d. A panic is the only way out:
// t.FailNow cannot be called from another goroutine, and a hanging Send
// never returns to the test's.
func startWatchdog(name string, d time.Duration) (stop func()) {
	timer := time.AfterFunc(d, func() {
		fmt.Fprintf(os.Stderr, "conformance: %s still running after %v; all goroutines:\n\n%s\n", name, d, allStacks())
		panic(fmt.Sprintf("conformance: %s: watchdog expired after %v: the adapter or its harness hangs", name, d))
	})
	return func() { timer.Stop() }
}

func allStacks() []byte {
	for size := 1 << 16; ; size *= 2 {
		buf := make([]byte, size)
		if n := runtime.Stack(buf, true); n < size || size >= 64<<20 {
			return buf[:n]
		}
	}
}

// tryOpen opens a transport for sc; ok is false when the harness does not
// support sc. The transport is closed when t ends.
func (e *env) tryOpen(t *testing.T, sc Scenario) (tr transport.Transport, reason string, ok bool) {
	t.Helper()
	tr, err := e.h.Open(e.ctx, sc)
	if errors.Is(err, ErrUnsupported) {
		return nil, err.Error(), false
	}
	if err != nil {
		t.Fatalf("conformance: Open(%s): %v", sc, err)
	}
	if tr == nil {
		t.Fatalf("conformance: Open(%s) returned a nil Transport and no error", sc)
	}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return tr, "", true
}

// open is tryOpen that skips t when sc is not supported.
func (e *env) open(t *testing.T, sc Scenario) transport.Transport {
	t.Helper()
	tr, reason, ok := e.tryOpen(t, sc)
	if !ok {
		t.Skip(reason)
	}
	return tr
}

// received returns what the backend accepted; ok is false when the backend
// cannot show it.
func (e *env) received(t *testing.T) (rs []Received, ok bool) {
	t.Helper()
	rs, err := e.h.Received()
	if errors.Is(err, ErrUnsupported) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("conformance: Received: %v", err)
	}
	return rs, true
}

// send calls tr.Send with a deadline d after now (none when d is 0) and
// fails t if it does not return within d plus grace.
func (e *env) send(t *testing.T, tr transport.Transport, m *transport.Message, d time.Duration) (transport.Receipt, error) {
	t.Helper()
	ctx := e.ctx
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	start := time.Now()
	r, err := tr.Send(ctx, m)
	if took := time.Since(start); d > 0 && took > d+grace {
		t.Errorf("Send with a %v deadline returned after %v, want within %v", d, took.Round(time.Millisecond), d+grace)
	}
	return r, err
}

// errorf is t.Errorf with the harness's secret masked: a leaking adapter
// must not put the secret into the test output either.
func (e *env) errorf(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Error(e.mask(fmt.Sprintf(format, args...)))
}

// fatalf is t.Fatalf with the harness's secret masked.
func (e *env) fatalf(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Fatal(e.mask(fmt.Sprintf(format, args...)))
}

func (e *env) mask(s string) string {
	if secret := e.h.Secret(); secret != "" {
		for _, f := range secretForms(secret) {
			s = strings.ReplaceAll(s, f, "<secret>")
		}
	}
	return s
}

// testMessage returns a small valid message; tag tells messages apart.
func testMessage(tag string) *transport.Message {
	return &transport.Message{
		From:    mail.Address{Name: "Conformance Suite", Address: "sender@example.com"},
		To:      mail.Address{Address: "rcpt@example.net"},
		Subject: "conformance: " + tag,
		Text:    "This mail was sent by the mailspool conformance suite (" + tag + ").\n",
	}
}

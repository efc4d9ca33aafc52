package conformance

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mailspool/mailspool/transport"
)

const watchdogChildEnv = "CONFORMANCE_WATCHDOG_CHILD"

// TestWatchdog runs a case that never returns in a child process and
// checks that the watchdog kills it, naming the case and showing the stuck
// goroutine.
func TestWatchdog(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWatchdogChild$", "-test.v")
	cmd.Env = append(os.Environ(), watchdogChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child: %v, want it to exit with a failure; output:\n%s", err, out)
	}
	for _, want := range []string{
		"conformance: TestWatchdogChild/stuck still running after 200ms",
		"panic: conformance: TestWatchdogChild/stuck: watchdog expired after 200ms",
		"conformance.stuckForever(", // the stuck goroutine's stack
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("child output lacks %q; output:\n%s", want, out)
		}
	}
}

// TestWatchdogChild is the child of TestWatchdog.
func TestWatchdogChild(t *testing.T) {
	if os.Getenv(watchdogChildEnv) != "1" {
		return // only runs as TestWatchdog's child process
	}
	s := &suite{newHarness: func(context.Context, *testing.T) (Harness, error) { return idleHarness{}, nil }, watchdog: 200 * time.Millisecond}
	s.run(t, "stuck", func(*testing.T, *env) { stuckForever() })
}

func stuckForever() { time.Sleep(time.Hour) }

// idleHarness is a Harness with no backend, for the watchdog test.
type idleHarness struct{}

func (idleHarness) Open(context.Context, Scenario) (transport.Transport, error) {
	return nil, ErrUnsupported
}
func (idleHarness) Attempts() int                 { return 0 }
func (idleHarness) Received() ([]Received, error) { return nil, ErrUnsupported }
func (idleHarness) Secret() string                { return "" }
func (idleHarness) Close() error                  { return nil }

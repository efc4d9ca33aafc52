package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mailspool/mailspool/conformance"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/fake"
)

// The suite is checked against the fake made faulty in one way at a time:
// each fault must fail the cases that exist to catch it, and only those.
// Every run includes accept, which must pass, to show the harness works.

const brokenChildEnv = "CONFORMANCE_BROKEN_CHILD"

// secret is what the harness calls its credential; a leaky adapter puts it
// into errors.
const secret = "hunter2-secret"

var faults = map[string]struct {
	wrap     func(transport.Transport) transport.Transport
	cases    []string // the cases to run besides accept
	wantFail []string // the cases that must fail
}{
	"retries": {
		wrap:     func(tr transport.Transport) transport.Transport { return retrying{tr} },
		cases:    []string{"smtp-451", "smtp-421", "one-attempt-per-send"},
		wantFail: []string{"smtp-451", "smtp-421", "one-attempt-per-send"},
	},
	"leaks-secret": {
		wrap:     func(tr transport.Transport) transport.Transport { return leaky{tr} },
		cases:    []string{"smtp-550", "no-secret-in-errors"},
		wantFail: []string{"no-secret-in-errors"},
	},
	"everything-permanent": {
		wrap:     func(tr transport.Transport) transport.Transport { return permanent{tr} },
		cases:    []string{"smtp-421", "smtp-550", "refused", "http-429", "cancelled-context", "close"},
		wantFail: []string{"smtp-421", "refused", "http-429", "cancelled-context", "close"},
	},
	"ignores-context": {
		wrap:     func(tr transport.Transport) transport.Transport { return deaf{tr} },
		cases:    []string{"cancelled-context"},
		wantFail: []string{"cancelled-context"},
	},
	"sets-message-id": {
		wrap:     func(tr transport.Transport) transport.Transport { return mutating{tr} },
		cases:    []string{"receipt-message-id", "intact-content"},
		wantFail: []string{"receipt-message-id"},
	},
	"drops-headers": {
		wrap:     func(tr transport.Transport) transport.Transport { return headless{tr} },
		cases:    []string{"intact-content"},
		wantFail: []string{"intact-content"},
	},
	"close-fails-twice": {
		wrap:     func(tr transport.Transport) transport.Transport { return &strictClose{Transport: tr} },
		cases:    []string{"close"},
		wantFail: []string{"close"},
	},
}

func TestSuiteCatchesFaults(t *testing.T) {
	t.Parallel()
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range faults {
			if !yield(n) {
				return
			}
		}
	})
	for _, name := range names {
		f := faults[name]
		t.Run(name, func(t *testing.T) {
			run := "^TestBrokenChild$/^(" + strings.Join(append([]string{"accept"}, f.cases...), "|") + ")$"
			cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.v")
			cmd.Env = append(os.Environ(), brokenChildEnv+"="+name)
			out, _ := cmd.CombinedOutput()
			if strings.Contains(string(out), secret) {
				t.Errorf("the secret appears in the test output")
			}
			failed := map[string]bool{}
			passed := map[string]bool{}
			for _, m := range regexp.MustCompile(`--- (FAIL|PASS): TestBrokenChild/([\w-]+) `).FindAllStringSubmatch(string(out), -1) {
				if m[1] == "FAIL" {
					failed[m[2]] = true
				} else {
					passed[m[2]] = true
				}
			}
			if !passed["accept"] {
				t.Fatalf("accept did not pass: the harness is broken; output:\n%s", out)
			}
			for _, c := range f.cases {
				if want := slices.Contains(f.wantFail, c); failed[c] != want || passed[c] == want {
					t.Errorf("case %s: failed = %v, want %v", c, failed[c], want)
				}
			}
			if t.Failed() {
				t.Logf("child output:\n%s", out)
			}
		})
	}
}

// TestBrokenChild is the child of TestSuiteCatchesFaults: the suite
// against the fake with one fault.
func TestBrokenChild(t *testing.T) {
	name := os.Getenv(brokenChildEnv)
	if name == "" {
		return // only runs as TestSuiteCatchesFaults' child process
	}
	wrap := faults[name].wrap
	conformance.RunTransportTests(t, func(context.Context, *testing.T) (conformance.Harness, error) {
		return &harness{wrap: wrap}, nil
	})
}

// harness runs the suite on a fake transport seen through wrap.
type harness struct {
	wrap func(transport.Transport) transport.Transport
	tr   *fake.Transport
}

var steps = map[conformance.Scenario]string{
	conformance.Accept: "ok", conformance.SMTP421: "421", conformance.SMTP451: "451",
	conformance.SMTP550: "550", conformance.Refused: "refused", conformance.HTTP429: "http-429",
	conformance.HTTP500: "http-500",
}

func (h *harness) Open(_ context.Context, s conformance.Scenario) (transport.Transport, error) {
	step, ok := steps[s]
	if !ok {
		return nil, fmt.Errorf("%w: not needed by these tests", conformance.ErrUnsupported)
	}
	h.tr = fake.New(&fake.Options{Script: []string{step}})
	return h.wrap(h.tr), nil
}

func (h *harness) Attempts() int { return h.tr.Attempts() }

func (h *harness) Received() ([]conformance.Received, error) {
	var rs []conformance.Received
	for _, m := range h.tr.Sent() {
		rs = append(rs, conformance.ReceivedFromMessage(&m))
	}
	return rs, nil
}

func (h *harness) Secret() string { return secret }
func (h *harness) Close() error   { return nil }

// retrying sends once more after a failure.
type retrying struct{ transport.Transport }

func (r retrying) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	rc, err := r.Transport.Send(ctx, m)
	if err != nil {
		rc, err = r.Transport.Send(ctx, m)
	}
	return rc, err
}

// leaky puts the secret into its errors.
type leaky struct{ transport.Transport }

func (l leaky) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	rc, err := l.Transport.Send(ctx, m)
	if err != nil {
		err = fmt.Errorf("send as apikey:%s: %w", secret, err)
	}
	return rc, err
}

// permanent reports every failure as Permanent.
type permanent struct{ transport.Transport }

func (p permanent) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	rc, err := p.Transport.Send(ctx, m)
	var te *transport.Error
	if errors.As(err, &te) {
		c := *te
		c.Kind = transport.Permanent
		err = &c
	}
	return rc, err
}

// deaf ignores the caller's context.
type deaf struct{ transport.Transport }

func (d deaf) Send(_ context.Context, m *transport.Message) (transport.Receipt, error) {
	return d.Transport.Send(context.Background(), m)
}

// mutating fills in the caller's MessageID.
type mutating struct{ transport.Transport }

func (mu mutating) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	if m.MessageID == "" {
		m.MessageID = transport.NewMessageID(m.From.Address)
	}
	return mu.Transport.Send(ctx, m)
}

// headless drops the extra headers.
type headless struct{ transport.Transport }

func (h headless) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	c := *m
	c.Headers = nil
	return h.Transport.Send(ctx, &c)
}

// strictClose fails every Close after the first.
type strictClose struct {
	transport.Transport
	closed bool
}

func (s *strictClose) Close() error {
	if s.closed {
		return errors.New("already closed")
	}
	s.closed = true
	return s.Transport.Close()
}

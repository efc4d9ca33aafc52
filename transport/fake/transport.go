package fake

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/mailspool/mailspool/classify"
	"github.com/mailspool/mailspool/transport"
)

// DefaultTimeout bounds a hang or stall step when Options.Timeout is 0, as
// a real client's own timeout would.
const DefaultTimeout = 15 * time.Second

// Options configure a fake Transport. The zero value accepts every mail.
type Options struct {
	// Script lists the steps Sends take, in order (see the package
	// documentation); each Send consumes one and the last one repeats. An
	// empty Script is "ok".
	Script []string
	// Cycle makes the script start over after its last step instead of
	// repeating that step.
	Cycle bool
	// Recipient takes the step from the recipient's plus tag
	// (user+550@example.com takes 550); a recipient without a tag that names
	// a step takes the next script step.
	Recipient bool
	// Timeout bounds how long a hang or stall step blocks when the context
	// has no earlier deadline; 0 means DefaultTimeout.
	Timeout time.Duration
	// Latency is how long every Send takes before its step, honouring the
	// context (a context done meanwhile fails like a dial timeout).
	Latency time.Duration
	// Discard keeps no copies of the messages: Sent and Messages return
	// nothing and Attempts counts on. For long runs (benchmarks, a worker
	// draining a large backlog) where the copies would grow without bound.
	Discard bool
}

// Transport replays recorded provider responses. It is safe for concurrent
// use and records a copy of every message that reached a step.
type Transport struct {
	script    []*fixture
	cycle     bool
	recipient bool
	timeout   time.Duration
	latency   time.Duration
	discard   bool
	closing   chan struct{} // closed by Close: releases hang and stall steps

	mu       sync.Mutex
	next     int
	closed   bool
	attempts int
	messages []transport.Message
	sent     []transport.Message
}

// New returns a fake Transport. It panics if opts names an unknown step;
// use [URLOpener] for scripts that come from input.
func New(opts *Options) *Transport {
	t, err := newTransport(opts)
	if err != nil {
		panic(err)
	}
	return t
}

func newTransport(opts *Options) (*Transport, error) {
	if opts == nil {
		opts = &Options{}
	}
	t := &Transport{
		cycle:     opts.Cycle,
		recipient: opts.Recipient,
		timeout:   opts.Timeout,
		latency:   opts.Latency,
		discard:   opts.Discard,
		closing:   make(chan struct{}),
	}
	if t.timeout == 0 {
		t.timeout = DefaultTimeout
	}
	if t.timeout < 0 || t.latency < 0 {
		return nil, errors.New("fake: timeout and latency must not be negative")
	}
	steps := opts.Script
	if len(steps) == 0 {
		steps = []string{"ok"}
	}
	for _, s := range steps {
		f, err := lookupStep(s)
		if err != nil {
			return nil, err
		}
		t.script = append(t.script, f)
	}
	return t, nil
}

// Close makes every later Send fail with [transport.ErrClosed] and releases Sends
// blocked in a hang or stall step. It is idempotent and returns nil.
func (t *Transport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.closed = true
		close(t.closing)
	}
	return nil
}

// take consumes the step for m and records a copy of m (with its
// MessageID set); it fails after Close.
func (t *Transport) take(m *transport.Message) (*fixture, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, closedError()
	}
	t.attempts++
	if !t.discard {
		t.messages = append(t.messages, cloneMessage(m))
	}
	if t.recipient {
		if f := tagStep(m.To.Address); f != nil {
			return f, nil
		}
	}
	i := t.next
	if t.cycle {
		i %= len(t.script)
	} else {
		i = min(i, len(t.script)-1)
	}
	t.next++
	return t.script[i], nil
}

// tagStep returns the fixture named by the plus tag of addr, or nil.
func tagStep(addr string) *fixture {
	local, _, _ := strings.Cut(addr, "@")
	_, tag, ok := strings.Cut(local, "+")
	if !ok {
		return nil
	}
	f, err := lookupStep(tag)
	if err != nil {
		return nil
	}
	return f
}

func (t *Transport) recordSent(m *transport.Message) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.discard {
		t.sent = append(t.sent, cloneMessage(m))
	}
}

// Sent returns copies of the messages the fake accepted, in order.
func (t *Transport) Sent() []transport.Message {
	t.mu.Lock()
	defer t.mu.Unlock()
	return cloneMessages(t.sent)
}

// Messages returns copies of every message a Send attempted to deliver,
// accepted or not, in order. A Send that failed before an attempt (after
// Close, with a context already done, for an invalid message) is not in it.
// A message given without a MessageID is recorded with the one generated.
func (t *Transport) Messages() []transport.Message {
	t.mu.Lock()
	defer t.mu.Unlock()
	return cloneMessages(t.messages)
}

// Attempts returns how many delivery attempts Sends made: len(Messages())
// unless Options.Discard is set.
func (t *Transport) Attempts() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.attempts
}

// Reset forgets every recorded message and restarts the script.
func (t *Transport) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.messages, t.sent, t.next, t.attempts = nil, nil, 0, 0
}

func cloneMessage(m *transport.Message) transport.Message {
	c := *m
	c.Headers = append([]transport.Header(nil), m.Headers...)
	if m.Attachments != nil {
		c.Attachments = make([]transport.Attachment, len(m.Attachments))
		for i, a := range m.Attachments {
			a.Data = bytes.Clone(a.Data)
			c.Attachments[i] = a
		}
	}
	return c
}

func cloneMessages(ms []transport.Message) []transport.Message {
	out := make([]transport.Message, len(ms))
	for i := range ms {
		out[i] = cloneMessage(&ms[i])
	}
	return out
}

// Send takes the next step (see [Options]) and returns what a real adapter
// returns for that recorded response, classified by package classify: nil
// and a Receipt whose MessageID is m.MessageID (or a generated one) for an
// accepting step, otherwise a classified error.
//
// Before any step, Send fails without an attempt after Close (Connection,
// [transport.ErrClosed] in the chain), with a context already done or done during
// the latency (as a dial timeout), and for an invalid m (Permanent, the
// [transport.ValidationError] in the chain). Send never modifies m.
func (t *Transport) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	if err := t.ready(ctx, m); err != nil {
		return transport.Receipt{}, err
	}
	msg := *m
	if msg.MessageID == "" {
		msg.MessageID = transport.NewMessageID(msg.From.Address)
	}
	f, err := t.take(&msg)
	if err != nil {
		return transport.Receipt{}, err
	}
	if err := t.outcome(ctx, f); err != nil {
		return transport.Receipt{}, err
	}
	t.recordSent(&msg)
	return transport.Receipt{MessageID: msg.MessageID, Response: f.response()}, nil
}

// ready fails Send before an attempt: after Close, for a context done
// before or during the latency, or for an invalid message.
func (t *Transport) ready(ctx context.Context, m *transport.Message) error {
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return closedError()
	}
	if err := m.Validate(); err != nil {
		return &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeMessage, Rule: "invalid-message", Err: err}
	}
	if ctx.Err() != nil {
		return classify.Error(opError("dial", ctxNetError(ctx)))
	}
	if t.latency > 0 {
		timer := time.NewTimer(t.latency)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			return classify.Error(opError("dial", ctxNetError(ctx)))
		case <-t.closing:
			return closedError()
		}
	}
	return nil
}

var _ transport.Transport = (*Transport)(nil)

package composite_test

import (
	"context"
	"fmt"
	"net"
	"net/mail"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/classify"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/composite"
	"github.com/mailspool/mailspool/transport/fake"
)

// provider is a member whose answer a test sets: a real SMTP reply text
// goes through package classify, as an adapter's would.
type provider struct {
	mu       sync.Mutex
	reply    string // "" accepts; an SMTP reply refuses; "reset" resets the connection
	attempts int
	accepted []string // recipients
}

func (p *provider) set(reply string) { p.mu.Lock(); p.reply = reply; p.mu.Unlock() }

func (p *provider) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attempts++
	if p.reply == "paused" {
		// An API adapter's own verdict: our account is paused.
		return transport.Receipt{}, &transport.Error{Kind: transport.Temporary, Scope: transport.ScopeSender, Code: 403, Detail: "paused: sending is paused for this account"}
	}
	if p.reply == "reset" {
		return transport.Receipt{}, classify.Error(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET})
	}
	if p.reply != "" {
		return transport.Receipt{}, classify.SMTPReply(p.reply)
	}
	p.accepted = append(p.accepted, m.To.Address)
	return transport.Receipt{MessageID: fmt.Sprintf("id-%d", p.attempts)}, nil
}

func (p *provider) Close() error { return nil }

func (p *provider) count() int { p.mu.Lock(); defer p.mu.Unlock(); return p.attempts }

func msg(to string) *transport.Message {
	return &transport.Message{MessageID: strings.NewReplacer("@", ".", "+", "-").Replace(to) + "@shop.example", From: mail.Address{Address: "noreply@shop.example"}, To: mail.Address{Address: to}, Subject: "s", Text: "t"}
}

// open makes raw's composite with the given members instead of opening
// their URLs.
func open(t *testing.T, raw string, opts composite.Options, members ...transport.Transport) *composite.Transport {
	t.Helper()
	sp, err := composite.Parse(raw)
	require.NoError(t, err)
	c, err := composite.New(sp, members, opts)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func fakeMember(t *testing.T, script string) *fake.Transport {
	t.Helper()
	return fake.New(&fake.Options{Script: []string{script}, Recipient: true, Timeout: 300 * time.Millisecond})
}

func isDown(t *testing.T, h composite.Health, member string) bool {
	t.Helper()
	down, err := h.Down(context.Background(), "default")
	require.NoError(t, err)
	_, ok := down[member]
	return ok
}

// A 550 5.1.1 is the mail's verdict: tried on A only, never on B, and A
// stays up.
func TestPermanentRecipientIsTheVerdict(t *testing.T) {
	h := &composite.Memory{}
	a, b := fakeMember(t, "ok"), fakeMember(t, "ok")
	c := open(t, "failover(fake://a, fake://b)", composite.Options{Health: h}, a, b)
	_, err := c.Send(context.Background(), msg("x+550@example.com"))
	require.Error(t, err)
	assert.Equal(t, transport.Permanent, transport.KindOf(err))
	assert.Equal(t, transport.ScopeRecipient, transport.ScopeOf(err))
	assert.Equal(t, "fake://a", composite.MemberOf(err))
	assert.Contains(t, err.Error(), "via fake://a: permanent: 550")
	assert.Equal(t, 1, a.Attempts())
	assert.Equal(t, 0, b.Attempts(), "never tried on another member")
	assert.False(t, isDown(t, h, "fake://a"))
	r, err := c.Send(context.Background(), msg("y@example.com"))
	require.NoError(t, err)
	assert.Equal(t, "fake://a", r.Member, "A still takes the mail")
}

// A Temporary reply is retried later by the queue: no other member now,
// the member stays up, and round-robin sends the retry to the same member.
func TestTemporaryStaysOnTheMember(t *testing.T) {
	h := &composite.Memory{}
	a, b := fakeMember(t, "ok"), fakeMember(t, "ok")
	c := open(t, "roundrobin(fake://a, fake://b)", composite.Options{Health: h}, a, b)
	m := msg("x+450@example.com")
	_, err := c.Send(context.Background(), m)
	require.Error(t, err)
	assert.Equal(t, transport.Temporary, transport.KindOf(err))
	first := composite.MemberOf(err)
	assert.Equal(t, 1, a.Attempts()+b.Attempts())
	assert.False(t, isDown(t, h, first))
	for range 5 {
		_, err = c.Send(context.Background(), m)
		assert.Equal(t, first, composite.MemberOf(err), "the retry goes to the same member")
	}
}

// A connection failure takes the member down and the same mail goes
// through the next member at once; later sends skip the member.
func TestConnectionFailsOver(t *testing.T) {
	h := &composite.Memory{}
	var downs []string
	a, b := fakeMember(t, "refused"), fakeMember(t, "ok")
	c := open(t, "failover(fake://a, fake://b; probe=1h)", composite.Options{Health: h, OnDown: func(m string, _ error) { downs = append(downs, m) }}, a, b)
	r, err := c.Send(context.Background(), msg("x@example.com"))
	require.NoError(t, err)
	assert.Equal(t, "fake://b", r.Member)
	assert.True(t, isDown(t, h, "fake://a"))
	assert.Equal(t, []string{"fake://a"}, downs)
	for i := range 5 {
		r, err = c.Send(context.Background(), msg(fmt.Sprintf("y%d@example.com", i)))
		require.NoError(t, err)
		assert.Equal(t, "fake://b", r.Member)
	}
	assert.Equal(t, 1, a.Attempts(), "a down member is skipped")
	assert.Equal(t, []string{"fake://a"}, downs, "one alert per outage")
}

// A 535 (authentication, lane scope) and a sender-scope refusal take the
// member down and alert; the mail goes through the next member and no
// recipient is failed.
func TestSenderAndAuthTakeTheMemberDown(t *testing.T) {
	for _, reply := range []string{"535 5.7.8 Authentication credentials invalid", "550 5.7.1 Sender domain not verified", "paused"} {
		t.Run(reply[:3], func(t *testing.T) {
			h := &composite.Memory{}
			alerts := map[string]error{}
			a, b := &provider{reply: reply}, &provider{}
			c := open(t, "failover(fake://a, fake://b)", composite.Options{Health: h, OnDown: func(m string, err error) { alerts[m] = err }}, a, b)
			r, err := c.Send(context.Background(), msg("x@example.com"))
			require.NoError(t, err, "the recipient is not failed")
			assert.Equal(t, "fake://b", r.Member)
			assert.True(t, isDown(t, h, "fake://a"))
			require.Contains(t, alerts, "fake://a")
			assert.Contains(t, alerts["fake://a"].Error(), reply[:3])
			assert.Equal(t, []string{"x@example.com"}, b.accepted)

			// With B refusing too, the mail is retried, not failed.
			b.set(reply)
			require.NoError(t, h.MarkUp(context.Background(), "default", "fake://a", time.Now()))
			_, err = c.Send(context.Background(), msg("y@example.com"))
			require.Error(t, err)
			assert.NotEqual(t, transport.Permanent, transport.KindOf(err))
		})
	}
}

// A mail that may have been delivered through A is never sent through B:
// not within the attempt, and not at the queue's retry while A is down.
func TestMaybeDeliveredIsNeverSentThroughAnotherMember(t *testing.T) {
	h := &composite.Memory{}
	a, b := fakeMember(t, "ok"), fakeMember(t, "ok")
	c := open(t, "failover(fake://a, fake://b; probe=1h)", composite.Options{Health: h}, a, b)
	m := msg("x+stall@example.com")
	_, err := c.Send(context.Background(), m)
	require.Error(t, err)
	var te *transport.Error
	require.ErrorAs(t, err, &te)
	assert.True(t, te.MaybeDelivered)
	assert.Equal(t, 0, b.Attempts())

	// A goes down (another mail finds it refusing); the retry of the
	// maybe-delivered mail waits for A.
	marked(t, true)(h.MarkDown(context.Background(), "default", "fake://a", "refused", time.Now(), time.Now().Add(time.Hour)))
	ctx := transport.WithMaybeDelivered(context.Background())
	_, err = c.Send(ctx, m)
	require.Error(t, err)
	assert.Equal(t, transport.Temporary, transport.KindOf(err))
	assert.Contains(t, err.Error(), "may have been delivered through member fake://a")
	assert.Equal(t, 0, b.Attempts(), "0 duplicates through B")
	// Other mail flows through B meanwhile.
	r, err := c.Send(context.Background(), msg("y@example.com"))
	require.NoError(t, err)
	assert.Equal(t, "fake://b", r.Member)
}

// One half-open probe brings a member back: exactly one of many
// concurrent sends tries it when its probe is due.
func TestProbeBringsTheMemberBack(t *testing.T) {
	h := &composite.Memory{}
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	a, b := &provider{reply: "reset"}, &provider{}
	c := open(t, "failover(fake://a, fake://b; probe=30s)", composite.Options{Health: h, Now: clock}, a, b)
	marked(t, true)(h.MarkDown(context.Background(), "default", "fake://a", "reset", now, now.Add(30*time.Second)))
	a.set("")
	for i := range 10 {
		r, err := c.Send(context.Background(), msg(fmt.Sprintf("d%d@example.com", i)))
		require.NoError(t, err)
		assert.Equal(t, "fake://b", r.Member)
	}
	assert.Zero(t, a.count())
	mu.Lock()
	now = now.Add(31 * time.Second)
	mu.Unlock()
	a.set("reset") // a failed probe: A stays down
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			_, _ = c.Send(context.Background(), msg(fmt.Sprintf("p%d@example.com", i)))
		})
	}
	wg.Wait()
	assert.Equal(t, 1, a.count(), "one probe")
	assert.True(t, isDown(t, h, "fake://a"), "a failed probe leaves A down")
	assert.Equal(t, 20, len(b.accepted)-10, "every mail went through B, the probe's too")

	// The next probe succeeds: A is up and takes the mail again.
	a.set("")
	mu.Lock()
	now = now.Add(31 * time.Second)
	mu.Unlock()
	for i := range 5 {
		r, err := c.Send(context.Background(), msg(fmt.Sprintf("q%d@example.com", i)))
		require.NoError(t, err)
		assert.Equal(t, "fake://a", r.Member)
	}
	assert.False(t, isDown(t, h, "fake://a"))
}

// A probe answered about the mail itself brings the member back, whether
// the answer is permanent (550 5.1.1) or temporary (450 4.2.1 mailbox
// busy): either way the member answered for its recipient. The mail gets
// that answer and does not go on to the next member.
func TestProbeAnsweredAboutTheMailBringsTheMemberBack(t *testing.T) {
	for _, reply := range []string{"550 5.1.1 No such user", "450 4.2.1 Mailbox busy"} {
		t.Run(reply[:3], func(t *testing.T) {
			h := &composite.Memory{}
			a, b := &provider{reply: reply}, &provider{}
			c := open(t, "failover(fake://a, fake://b; probe=1h)", composite.Options{Health: h}, a, b)
			past := time.Now().Add(-2 * time.Hour)
			marked(t, true)(h.MarkDown(context.Background(), "default", "fake://a", "refused", past, past.Add(time.Hour)))
			_, err := c.Send(context.Background(), msg("busy@example.com"))
			var te *transport.Error
			require.ErrorAs(t, err, &te)
			assert.Equal(t, reply[:3], strconv.Itoa(te.Code), "the mail gets A's answer")
			assert.Equal(t, 1, a.count(), "A was probed")
			assert.False(t, isDown(t, h, "fake://a"), "A answered about the mail: it is up")
			assert.Zero(t, b.count(), "the mail did not go on to B")
		})
	}
}

// Round-robin weights 3:1 hold within ±2 % over 10 000 mails, and a
// member that is down gives its share to the others.
func TestRoundRobinWeights(t *testing.T) {
	h := &composite.Memory{}
	a, b := &provider{}, &provider{}
	c := open(t, "roundrobin(fake://a, fake://b; weights=3,1)", composite.Options{Health: h}, a, b)
	const n = 10000
	for i := range n {
		_, err := c.Send(context.Background(), msg(fmt.Sprintf("u%d@example.com", i)))
		require.NoError(t, err)
	}
	share := float64(a.count()) / n
	t.Logf("member a took %.2f%% (want 75%% ± 2%%)", 100*share)
	assert.InDelta(t, 0.75, share, 0.02)
	st := c.Members()
	assert.Equal(t, int64(a.count()), st[0].Sent)
	assert.Equal(t, 3, st[0].Weight)

	now := time.Now()
	marked(t, true)(h.MarkDown(context.Background(), "default", "fake://a", "down", now, now.Add(time.Hour)))
	before := a.count()
	for i := range 100 {
		r, err := c.Send(context.Background(), msg(fmt.Sprintf("v%d@example.com", i)))
		require.NoError(t, err)
		assert.Equal(t, "fake://b", r.Member)
	}
	assert.Equal(t, before, a.count())
}

// slowReset is a member whose sends wait until release is closed, then
// fail with a connection reset.
type slowReset struct {
	started chan struct{}
	release chan struct{}
}

func (s *slowReset) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	s.started <- struct{}{}
	<-s.release
	return transport.Receipt{}, classify.Error(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET})
}

func (s *slowReset) Close() error { return nil }

// A failure of a send that began before the member came back up (another
// worker's probe succeeded meanwhile) leaves it up, and raises no alert:
// an alert would say a member is down that every worker sends through. A
// failure of a send that began after the recovery takes it down and
// raises one.
func TestStaleFailureRaisesNoAlert(t *testing.T) {
	h := &composite.Memory{}
	var mu sync.Mutex
	var downs []string
	alerts := func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(downs) }
	a := &slowReset{started: make(chan struct{}, 2), release: make(chan struct{})}
	c := open(t, "failover(fake://a, fake://b; probe=1h)", composite.Options{Health: h, OnDown: func(m string, _ error) {
		mu.Lock()
		downs = append(downs, m)
		mu.Unlock()
	}}, a, fakeMember(t, "ok"))
	type result struct {
		r   transport.Receipt
		err error
	}
	sent := make(chan result, 1)
	go func() {
		r, err := c.Send(context.Background(), msg("x@example.com"))
		sent <- result{r, err}
	}()
	<-a.started
	require.NoError(t, h.MarkUp(context.Background(), "default", "fake://a", time.Now()))
	close(a.release)
	res := <-sent
	require.NoError(t, res.err)
	assert.Equal(t, "fake://b", res.r.Member, "the mail went on through B")
	assert.False(t, isDown(t, h, "fake://a"), "a failure older than the recovery took A down")
	assert.Empty(t, alerts(), "an alert for a member that is up")

	r, err := c.Send(context.Background(), msg("y@example.com"))
	require.NoError(t, err)
	assert.Equal(t, "fake://b", r.Member)
	assert.True(t, isDown(t, h, "fake://a"))
	assert.Equal(t, []string{"fake://a"}, alerts())
}

package suppress

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/idna"
)

// scripted is a transport that answers each recipient with the error
// given for it (nil: accepted) and counts the sends per recipient.
type scripted struct {
	mu      sync.Mutex
	answers map[string]error
	sends   map[string]int
}

func (s *scripted) Send(_ context.Context, m *transport.Message) (transport.Receipt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sends == nil {
		s.sends = map[string]int{}
	}
	s.sends[m.To.Address]++
	return transport.Receipt{MessageID: "p-" + m.To.Address}, s.answers[m.To.Address]
}

func (s *scripted) Close() error { return nil }

func (s *scripted) sent(addr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sends[addr]
}

func mailTo(addr string) *transport.Message {
	return &transport.Message{From: mail.Address{Address: "shop@example.com"}, To: mail.Address{Address: addr}, Subject: "hello", Text: "hi"}
}

// drain runs a worker on q until every id has left pending, retry and
// sending.
func drain(t *testing.T, q *queue.Queue, tr transport.Transport, ids ...int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := queue.NewWorker(q, tr, &queue.WorkerOptions{PollInterval: 20 * time.Millisecond, CleanupInterval: -1})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	for _, id := range ids {
		for {
			r, err := q.Row(context.Background(), id)
			require.NoError(t, err)
			if r.Status == "sent" || r.Status == "failed" {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	cancel()
	require.NoError(t, <-done)
}

func TestScreenAtEnqueue(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		l := openList(t, s)
		_, err := l.Add(ctx, Entry{Address: "gone@example.com", Reason: HardBounce, Source: "operator"})
		require.NoError(t, err)

		q, err := queue.New(ctx, s.db, queue.Lane{Name: "default", Screen: l.Screen("default", Policy{})}, nil)
		require.NoError(t, err)
		_, err = q.Enqueue(ctx, s.db, mailTo("Gone@Example.com"))
		require.ErrorIs(t, err, queue.ErrSuppressed)
		var se *queue.SuppressedError
		require.True(t, errors.As(err, &se))
		assert.Equal(t, "hard_bounce", se.Reason)
		assert.Contains(t, err.Error(), "hard_bounce since ")
		rows, err := q.List(ctx, queue.ListOptions{})
		require.NoError(t, err)
		assert.Empty(t, rows, "nothing written")

		// A lane that bypasses the list explicitly still enqueues.
		bypass, err := queue.New(ctx, s.db, queue.Lane{Name: "resets", Screen: l.Screen("resets", Policy{Bypass: true})}, nil)
		require.NoError(t, err)
		_, err = bypass.Enqueue(ctx, s.db, mailTo("gone@example.com"))
		require.NoError(t, err)
	})
}

func TestScreenAtClaim(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		l := openList(t, s)
		q, err := queue.New(ctx, s.db, queue.Lane{Name: "default", Screen: l.Screen("default", Policy{})}, nil)
		require.NoError(t, err)
		waiting, err := q.Enqueue(ctx, s.db, mailTo("later@example.com"))
		require.NoError(t, err)
		other, err := q.Enqueue(ctx, s.db, mailTo("fine@example.com"))
		require.NoError(t, err)
		// Suppressed while its mail waits.
		_, err = l.Add(ctx, Entry{Address: "LATER@example.com", Reason: Complaint})
		require.NoError(t, err)

		tr := &scripted{}
		drain(t, q, tr, waiting, other)
		assert.Zero(t, tr.sent("later@example.com"))
		assert.Equal(t, 1, tr.sent("fine@example.com"))
		r, err := q.Row(ctx, waiting)
		require.NoError(t, err)
		assert.Equal(t, "failed", r.Status)
		assert.Equal(t, "suppressed", r.LastKind)
		assert.Contains(t, r.LastError, "complaint")
		assert.Zero(t, r.Attempts, "no attempt was made")
	})
}

func TestScreenFeedsOnlyRecipientScope(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		l := openList(t, s)
		q, err := queue.New(ctx, s.db, queue.Lane{Name: "default", Screen: l.Screen("default", Policy{})}, nil)
		require.NoError(t, err)
		tr := &scripted{answers: map[string]error{
			"nouser@example.com":  &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeRecipient, Code: 550, Enhanced: "5.1.1", Err: errors.New("550 5.1.1 no such user")},
			"badsyn@example.com":  &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeRecipient, Code: 553, Enhanced: "5.1.3", Err: errors.New("553 5.1.3 bad address syntax")},
			"api@example.com":     &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeRecipient, Code: 400, Err: errors.New("the provider says the address does not exist")},
			"blocked@example.com": &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeSender, Code: 554, Enhanced: "5.7.1", Err: errors.New("554 5.7.1 our IP is on a blocklist")},
			"ruled@example.com":   &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeLane, Code: 550, Enhanced: "5.1.1", Err: errors.New("550 5.1.1 said by a relay that says it for everything")},
			"content@example.com": &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeMessage, Code: 552, Enhanced: "5.3.4", Err: errors.New("552 5.3.4 message too big")},
			"later@example.com":   &transport.Error{Kind: transport.Temporary, Scope: transport.ScopeRecipient, Code: 450, Enhanced: "4.2.1", Err: errors.New("450 4.2.1 mailbox busy")},
		}}
		var ids []int64
		for _, a := range []string{"nouser@example.com", "badsyn@example.com", "api@example.com", "blocked@example.com", "ruled@example.com", "content@example.com"} {
			// One attempt each: a Permanent verdict of sender or lane scope
			// is acted on as Temporary (queue.verdict), and fails here.
			id, err := q.Enqueue(ctx, s.db, mailTo(a), queue.MaxAttempts(1))
			require.NoError(t, err)
			ids = append(ids, id)
		}
		soft, err := q.Enqueue(ctx, s.db, mailTo("later@example.com"), queue.MaxAttempts(1))
		require.NoError(t, err)
		drain(t, q, tr, append(ids, soft)...)

		es, err := l.Entries(ctx, Filter{})
		require.NoError(t, err)
		got := map[string]Reason{}
		for _, e := range es {
			got[e.Address] = e.Reason
			assert.Equal(t, ScopeAll, e.Scope)
			assert.Regexp(t, `^mail:default/\d+$`, e.Source)
		}
		assert.Equal(t, map[string]Reason{"nouser@example.com": HardBounce, "badsyn@example.com": Invalid, "api@example.com": HardBounce}, got,
			"only recipient-scope permanent failures suppress, whatever the code: never a sender block, a lane verdict, a message problem or a soft bounce")
	})
}

func TestPolicyOffAndDuration(t *testing.T) {
	now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	_, on := Policy{HardBounce: Off}.Entry("a@example.com", HardBounce, "default", "x", now)
	assert.False(t, on)
	e, on := Policy{Complaint: 30 * 24 * time.Hour}.Entry("a@example.com", Complaint, "default", "x", now)
	require.True(t, on)
	assert.Equal(t, now.Add(30*24*time.Hour), e.ExpiresAt)
	e, _ = Policy{}.Entry("a@example.com", Unsubscribe, "news", "x", now)
	assert.Equal(t, "news", e.Scope, "an unsubscribe applies to its own lane")
	for s, want := range map[string]time.Duration{"forever": Forever, "off": Off, "30d": 30 * 24 * time.Hour, "": Forever} {
		d, err := ParseDuration(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, d, s)
	}
	_, err := ParseDuration("-1h")
	assert.Error(t, err)
}

// Under a policy that holds, a mail found suppressed at its claim waits
// (pending, "held", attempt given back, due again a Hold later) instead of
// failing; RemoveAndRelease removes the entry and makes the held mail due
// at once in one transaction, and the next claim sends it. A mail still
// suppressed under another entry is released but held again, never sent.
func TestHoldAndRelease(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		l := openList(t, s)
		q, err := queue.New(ctx, s.db, queue.Lane{Name: "default", Screen: l.Screen("default", Policy{Hold: time.Hour})}, nil)
		require.NoError(t, err)
		held, err := q.Enqueue(ctx, s.db, mailTo("later@example.com"))
		require.NoError(t, err)
		twice, err := q.Enqueue(ctx, s.db, mailTo("twice@example.com"))
		require.NoError(t, err)
		fine, err := q.Enqueue(ctx, s.db, mailTo("fine@example.com"))
		require.NoError(t, err)
		_, err = l.Add(ctx, Entry{Address: "later@example.com", Reason: Complaint})
		require.NoError(t, err)
		_, err = l.Add(ctx, Entry{Address: "twice@example.com", Reason: Complaint})
		require.NoError(t, err)
		_, err = l.Add(ctx, Entry{Address: "twice@example.com", Scope: "default", Reason: Manual})
		require.NoError(t, err)

		tr := &scripted{}
		holdUntilHeld := func(ids ...int64) {
			t.Helper()
			wctx, cancel := context.WithCancel(ctx)
			w, err := queue.NewWorker(q, tr, &queue.WorkerOptions{PollInterval: 20 * time.Millisecond, CleanupInterval: -1})
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() { done <- w.Run(wctx) }()
			for _, id := range ids {
				for { // waits for progress, not for a time
					r, err := q.Row(ctx, id)
					require.NoError(t, err)
					if r.LastKind == queue.KindHeld || r.Status == "sent" || r.Status == "failed" {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			cancel()
			require.NoError(t, <-done)
		}
		before := time.Now()
		holdUntilHeld(held, twice)
		drain(t, q, tr, fine)
		assert.Zero(t, tr.sent("later@example.com"))
		assert.Equal(t, 1, tr.sent("fine@example.com"))
		r, err := q.Row(ctx, held)
		require.NoError(t, err)
		assert.Equal(t, "pending", r.Status, "held, not failed")
		assert.Equal(t, queue.KindHeld, r.LastKind)
		assert.Contains(t, r.LastError, "complaint")
		assert.Zero(t, r.Attempts, "no attempt was made")
		assert.True(t, r.DueAt.After(before.Add(50*time.Minute)), "due again a Hold later: %v", r.DueAt)

		// Removing the entry releases the held mail in the same
		// transaction; removing one of two entries releases it to be held
		// again.
		n, released, err := l.RemoveAndRelease(ctx, "Later@example.com", "", []*queue.Queue{q})
		require.NoError(t, err)
		assert.EqualValues(t, 1, n)
		assert.EqualValues(t, 1, released)
		n, released, err = l.RemoveAndRelease(ctx, "twice@example.com", ScopeAll, []*queue.Queue{q})
		require.NoError(t, err)
		assert.EqualValues(t, 1, n)
		assert.EqualValues(t, 1, released)
		r, err = q.Row(ctx, held)
		require.NoError(t, err)
		assert.False(t, r.DueAt.After(time.Now()), "due at once")

		drain(t, q, tr, held)
		assert.Equal(t, 1, tr.sent("later@example.com"), "sent once released")
		holdUntilHeld(twice)
		r, err = q.Row(ctx, twice)
		require.NoError(t, err)
		assert.Equal(t, "pending", r.Status)
		assert.Equal(t, queue.KindHeld, r.LastKind)
		assert.Contains(t, r.LastError, "manual", "held again under the lane's own entry")
		assert.Zero(t, tr.sent("twice@example.com"))

	})
}

// One mail may go past the list (queue.BypassSuppression), at enqueue and
// at its claim, with an audit row written in the enqueue's transaction;
// the lane's other mail to the address is still refused or stopped.
func TestBypassOneMail(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		l := openList(t, s)
		q, err := queue.New(ctx, s.db, queue.Lane{Name: "default", Screen: l.Screen("default", Policy{})}, nil)
		require.NoError(t, err)
		_, err = l.Add(ctx, Entry{Address: "reset@example.com", Reason: Complaint})
		require.NoError(t, err)

		_, err = q.Enqueue(ctx, s.db, mailTo("reset@example.com"))
		require.ErrorIs(t, err, queue.ErrSuppressed)
		_, err = q.Enqueue(ctx, s.db, mailTo("reset@example.com"), queue.BypassSuppression("  "))
		require.ErrorIs(t, err, queue.ErrInvalid, "a bypass needs a reason")
		reset, err := q.Enqueue(ctx, s.db, mailTo("reset@example.com"), queue.BypassSuppression("ops: password reset, ticket 123"))
		require.NoError(t, err)

		// In the caller's transaction, taken back with it.
		tx, err := s.db.BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = q.Enqueue(ctx, tx, mailTo("reset@example.com"), queue.BypassSuppression("rolled back"))
		require.NoError(t, err)
		require.NoError(t, tx.Rollback())

		// Suppressed while they wait: the bypassed one still goes.
		plain, err := q.Enqueue(ctx, s.db, mailTo("later@example.com"))
		require.NoError(t, err)
		past, err := q.Enqueue(ctx, s.db, mailTo("later@example.com"), queue.BypassSuppression("ops: must go"))
		require.NoError(t, err)
		_, err = l.Add(ctx, Entry{Address: "later@example.com", Reason: HardBounce})
		require.NoError(t, err)

		tr := &scripted{}
		drain(t, q, tr, reset, plain, past)
		assert.Equal(t, 1, tr.sent("reset@example.com"))
		assert.Equal(t, 1, tr.sent("later@example.com"), "the bypassed one only")
		r, err := q.Row(ctx, plain)
		require.NoError(t, err)
		assert.Equal(t, "suppressed", r.LastKind)
		r, err = q.Row(ctx, past)
		require.NoError(t, err)
		assert.Equal(t, "sent", r.Status)

		audit, err := l.Bypasses(ctx, "default", 0)
		require.NoError(t, err)
		require.Len(t, audit, 2, "the rolled-back enqueue left none")
		byID := map[int64]BypassRecord{}
		for _, b := range audit {
			byID[b.MailID] = b
		}
		assert.Equal(t, Complaint, byID[reset].Reason, "what it went past")
		assert.Equal(t, "ops: password reset, ticket 123", byID[reset].Why)
		assert.Equal(t, "reset@example.com", byID[reset].Address)
		assert.Equal(t, Reason(""), byID[past].Reason, "not suppressed at enqueue")
	})
}

// TestLongIDNAddressBouncesLikeAnyOther: an address the queue accepts at
// 254 bytes with A-label domains is stored in U-labels, longer in bytes.
// Its hard bounce is recorded like any other, and the outcomes of the
// batch it was claimed in are written: before, the list refused the
// address as too long, that error failed the whole outcome write, and
// every mail of the batch stayed in sending, to be sent again.
func TestLongIDNAddressBouncesLikeAnyOther(t *testing.T) {
	s := newSQLite(t)
	ctx := context.Background()
	l := openList(t, s)
	label, err := idna.Lookup.ToASCII(strings.Repeat("中", 20))
	require.NoError(t, err)
	domain := strings.Join([]string{label, label, label, label}, ".") + ".example"
	long := strings.Repeat("x", 254-1-len(domain)) + "@" + domain
	require.Len(t, long, 254)
	q, err := queue.New(ctx, s.db, queue.Lane{Name: "default", Screen: l.Screen("default", Policy{})}, nil)
	require.NoError(t, err)
	bad, err := q.Enqueue(ctx, s.db, mailTo(long), queue.MaxAttempts(1))
	require.NoError(t, err)
	good, err := q.Enqueue(ctx, s.db, mailTo("fine@example.com"))
	require.NoError(t, err)
	r, err := q.Row(ctx, bad)
	require.NoError(t, err)
	stored := r.To
	require.Greater(t, len(stored), 254, "stored in U-labels")
	tr := &scripted{answers: map[string]error{stored: &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeRecipient,
		Code: 550, Enhanced: "5.1.1", Err: errors.New("550 5.1.1 no such user")}}}

	wctx, cancel := context.WithCancel(ctx)
	w, err := queue.NewWorker(q, tr, &queue.WorkerOptions{PollInterval: 20 * time.Millisecond, CleanupInterval: -1})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() { cancel(); <-done }()
	// Wait for both outcomes, failing once nothing has changed for 15 s
	// (the worker retries a failed outcome write every 2 s).
	last, lastChange := "", time.Now()
	for {
		rb, err := q.Row(ctx, bad)
		require.NoError(t, err)
		rg, err := q.Row(ctx, good)
		require.NoError(t, err)
		if rb.Status == "failed" && rg.Status == "sent" {
			break
		}
		if now := fmt.Sprint(rb.Status, rg.Status, tr.sent(stored), tr.sent("fine@example.com")); now != last {
			last, lastChange = now, time.Now()
		}
		require.Less(t, time.Since(lastChange), 15*time.Second, "no progress: the bounced mail is %s, the good one %s", rb.Status, rg.Status)
		time.Sleep(20 * time.Millisecond)
	}
	assert.Equal(t, 1, tr.sent(stored))
	assert.Equal(t, 1, tr.sent("fine@example.com"))
	found, err := l.Lookup(ctx, s.db, "default", []string{long})
	require.NoError(t, err)
	assert.Equal(t, HardBounce, found[long].Reason, "looked up as given, in A-labels")
}

// TestLearntEntriesNeverShortenOne: what a send or a provider teaches
// never shortens the suppression in place for the address and scope. A
// complaint kept until removed stays when a lane whose policy keeps hard
// bounces 30 days (a bypassing reset lane, whose failures still feed the
// list) bounces the same address; a learnt entry that lasts longer does
// replace a shorter one; the operator's own entry replaces whatever is
// there, as documented.
func TestLearntEntriesNeverShortenOne(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		l := openList(t, s)
		now := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
		l.SetClock(func() time.Time { return now })
		bounce := &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeRecipient, Code: 550, Enhanced: "5.1.1", Err: errors.New("550 5.1.1 mailbox disabled")}
		resets := l.Screen("resets", Policy{Bypass: true, HardBounce: 30 * 24 * time.Hour})
		fail := func(addr string, id int64) {
			t.Helper()
			require.NoError(t, resets.FailedFunc(ctx, s.db, []queue.Failure{{Lane: "resets", ID: id, Address: addr, Err: bounce}}))
		}
		entry := func(addr string) Entry {
			t.Helper()
			es, err := l.Entries(ctx, Filter{Address: addr, Expired: true})
			require.NoError(t, err)
			require.Len(t, es, 1)
			return es[0]
		}

		_, err := l.Add(ctx, Entry{Address: "ann@example.com", Reason: Complaint, Source: "ses:1/ann@example.com"})
		require.NoError(t, err)
		fail("ann@example.com", 7)
		e := entry("ann@example.com")
		assert.Equal(t, Complaint, e.Reason)
		assert.True(t, e.ExpiresAt.IsZero(), "still until removed")
		now = now.Add(31 * 24 * time.Hour)
		found, err := l.Lookup(ctx, s.db, "marketing", []string{"ann@example.com"})
		require.NoError(t, err)
		assert.Contains(t, found, "ann@example.com", "the complainer is still suppressed 31 days later")

		// A shorter entry in place gives way to a longer one.
		_, err = l.Add(ctx, Entry{Address: "bob@example.com", Reason: Manual, ExpiresAt: now.Add(24 * time.Hour)})
		require.NoError(t, err)
		fail("bob@example.com", 8)
		e = entry("bob@example.com")
		assert.Equal(t, HardBounce, e.Reason)
		assert.Equal(t, now.Add(30*24*time.Hour).UnixMilli(), e.ExpiresAt.UnixMilli())
		// The same bounce again, later, extends it; an earlier expiry would not.
		now = now.Add(time.Hour)
		fail("bob@example.com", 9)
		assert.Equal(t, now.Add(30*24*time.Hour).UnixMilli(), entry("bob@example.com").ExpiresAt.UnixMilli())
		assert.Equal(t, "mail:resets/9", entry("bob@example.com").Source)

		// The operator replaces, shorter or not.
		_, err = l.Add(ctx, Entry{Address: "ann@example.com", Reason: Manual, ExpiresAt: now.Add(time.Hour)})
		require.NoError(t, err)
		e = entry("ann@example.com")
		assert.Equal(t, Manual, e.Reason)
		assert.Equal(t, now.Add(time.Hour).UnixMilli(), e.ExpiresAt.UnixMilli())
	})
}

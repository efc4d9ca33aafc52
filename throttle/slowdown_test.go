package throttle

import (
	"context"
	"fmt"
	"net/mail"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A scripted burst of 421 4.7.28 replies halves the domain's rate for the
// rule's hold, after which it climbs back to the configured rate.
//
// Nothing here is measured against an idle machine's pace: a busy machine
// only makes sends start later, so the sends are held to upper bounds
// (never more than the halved rate lets start while it holds), and the
// recovery is read from the throttle's own state on the store's clock
// (SQLite's is this machine's, the clock the recorder reads).
func TestGmail421HalvesTheRateThenRecovers(t *testing.T) {
	s := openMigrated(t, "sqlite", "sqlite:"+filepath.Join(t.TempDir(), "q.db"), true)
	ctx := context.Background()
	const mails = 90
	q, err := queue.New(ctx, s.db, queue.Lane{}, nil)
	require.NoError(t, err)
	for i := range mails {
		_, err := q.Enqueue(ctx, s.db, &transport.Message{From: mail.Address{Address: "app@sender.example"},
			To: mail.Address{Address: fmt.Sprintf("u%d@gmail.example", i)}, Subject: "hi", Text: "hi"})
		require.NoError(t, err)
	}
	var refusals atomic.Int32
	rec := &recorder{took: 5 * time.Millisecond, reply: func(m *transport.Message) error {
		if refusals.Add(1) <= 3 {
			return &transport.Error{Kind: transport.Temporary, Code: 421, Enhanced: "4.7.28", Detail: "Our system has detected an unusual rate of unsolicited mail originating from your IP address."}
		}
		return nil
	}}
	const hold, recover = 2 * time.Second, 2 * time.Second
	const senders = 4
	rate := Rate{N: 20, Per: time.Second, Burst: 1}
	var events []SlowEvent
	var mu sync.Mutex
	st := openStore(t, s.db)
	rules := []Rule{DefaultRules[0]}
	rules[0].Hold, rules[0].Recover = hold, recover
	p := &Policy{Lane: "default", Store: st, Rules: rules,
		Groups: []Group{{Name: "gmail", Match: []string{"gmail.example"}, Rate: rate}},
		OnSlow: func(ev SlowEvent) { mu.Lock(); events = append(events, ev); mu.Unlock() }}
	th, err := p.Throttle()
	require.NoError(t, err)
	wq, err := queue.New(ctx, s.db, queue.Lane{Throttle: th}, nil)
	require.NoError(t, err)
	wk, err := queue.NewWorker(wq, rec, &queue.WorkerOptions{Concurrency: senders, PollInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- wk.Run(runCtx) }()

	// Samples of the key's factor, each between two readings of the
	// store's clock, checked below against the slow-down's window.
	type sample struct {
		before, after time.Time
		factor        float64
	}
	var samples []sample
	last, idle := -1, 0
	for {
		n := countSent(t, s.db)
		before, err := st.Now(ctx)
		require.NoError(t, err)
		stat, err := st.Status(ctx)
		require.NoError(t, err)
		after, err := st.Now(ctx)
		require.NoError(t, err)
		if len(stat) > 0 {
			samples = append(samples, sample{before, after, stat[0].Factor})
			if stat[0].Factor < 1 {
				assert.Equal(t, "gmail-4.7.28", stat[0].SlowReason)
			}
		}
		if n == mails-3 {
			break
		}
		if n == last {
			idle++
		} else {
			idle = 0
		}
		require.Less(t, idle, 600, "no progress for 30 s: %d sent", n)
		last = n
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	require.NoError(t, <-done)
	mu.Lock()
	require.NotEmpty(t, events, "the 421 4.7.28 replies never slowed the domain down")
	assert.Equal(t, "domain:gmail", events[0].Key)
	assert.Equal(t, "gmail-4.7.28", events[0].Rule)
	assert.Equal(t, 0.5, events[0].Factor)
	mu.Unlock()

	// The slow-down as the store keeps it: halved until slowUntil (the
	// last refusal's time plus the hold), back to 1 by recovered.
	var factor float64
	var slowUS, recoveredUS int64
	var reason string
	require.NoError(t, s.db.QueryRowContext(ctx, `SELECT slow_factor, slow_until, recover_until, slow_reason FROM `+KeysTable+` WHERE name = 'domain:gmail'`).
		Scan(&factor, &slowUS, &recoveredUS, &reason))
	assert.Equal(t, 0.5, factor)
	assert.Equal(t, "gmail-4.7.28", reason)
	slowUntil, recovered := time.UnixMicro(slowUS), time.UnixMicro(recoveredUS)
	assert.Equal(t, recover, recovered.Sub(slowUntil), "the recovery does not span the rule's Recover")
	held := slowUntil.Add(-hold) // the last slow-down's start: halved from here to slowUntil

	// The factor the throttle reported: 0.5 while held, climbing
	// gradually (strictly between) while recovering, 1 after. Each sample
	// was read between before and after, and the factor never falls
	// during the recovery, so it lies between the expected factors then.
	want := func(at time.Time) float64 {
		switch {
		case !at.After(slowUntil):
			return 0.5
		case !at.Before(recovered):
			return 1
		}
		return 0.5 + 0.5*float64(at.Sub(slowUntil))/float64(recover)
	}
	sawSlowed, sawClimbing := false, false
	for _, sm := range samples {
		if sm.before.Before(held) {
			continue // before the last refusal: the key's state was still moving
		}
		assert.GreaterOrEqual(t, sm.factor, want(sm.before)-1e-9, "factor at %v", sm.before)
		assert.LessOrEqual(t, sm.factor, want(sm.after)+1e-9, "factor at %v", sm.after)
		sawSlowed = sawSlowed || sm.factor == 0.5
		sawClimbing = sawClimbing || (sm.factor > 0.5 && sm.factor < 1)
	}
	t.Logf("%d samples of the factor; held one: %v, one climbing: %v", len(samples), sawSlowed, sawClimbing)
	stat, err := st.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1.0, stat[0].Factor, "the rate did not recover")

	// Halved: the sends that started while it held. Each was granted by
	// the rate no earlier than held, or before it and still waiting to
	// start then (at most one per sender). The rate grants at most
	// (window + tolerance) / interval in a window, so at half the rate
	// (2 s at 10/s) at most 21 + 4; the full rate would let 41 + 4 start.
	iv := time.Duration(rate.interval()/0.5) * time.Microsecond
	tol := time.Duration(rate.tolerance(rate.interval()/0.5)) * time.Microsecond
	bound := int((hold+tol)/iv) + senders
	var during int
	for _, sp := range rec.spans("gmail.example") {
		if !sp.start.Before(held) && sp.start.Before(slowUntil) {
			during++
		}
	}
	t.Logf("%d sends started in the %v the rate was held at half (at most %d)", during, hold, bound)
	assert.LessOrEqual(t, during, bound, "the rate was not halved while held")
}

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
	var events []SlowEvent
	var mu sync.Mutex
	st := openStore(t, s.db)
	rules := []Rule{DefaultRules[0]}
	rules[0].Hold, rules[0].Recover = hold, recover
	p := &Policy{Lane: "default", Store: st, Rules: rules,
		Groups: []Group{{Name: "gmail", Match: []string{"gmail.example"}, Rate: Rate{N: 20, Per: time.Second, Burst: 1}}},
		OnSlow: func(ev SlowEvent) { mu.Lock(); events = append(events, ev); mu.Unlock() }}
	th, err := p.Throttle()
	require.NoError(t, err)
	wq, err := queue.New(ctx, s.db, queue.Lane{Throttle: th}, nil)
	require.NoError(t, err)
	wk, err := queue.NewWorker(wq, rec, &queue.WorkerOptions{Concurrency: 4, PollInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- wk.Run(runCtx) }()

	slowedAt := time.Time{}
	last, idle := -1, 0
	for {
		n := countSent(t, s.db)
		if slowedAt.IsZero() {
			stat, err := st.Status(ctx)
			require.NoError(t, err)
			if len(stat) > 0 && stat[0].Factor < 1 {
				slowedAt = time.Now()
				assert.InDelta(t, 0.5, stat[0].Factor, 0.01)
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
	require.False(t, slowedAt.IsZero(), "the 421 4.7.28 replies never slowed the domain down")
	mu.Lock()
	require.NotEmpty(t, events)
	assert.Equal(t, "domain:gmail", events[0].Key)
	assert.Equal(t, "gmail-4.7.28", events[0].Rule)
	mu.Unlock()

	spans := rec.spans("gmail.example")
	first := spans[0].start
	for _, sp := range spans {
		if sp.start.Before(first) {
			first = sp.start
		}
	}
	var during, after []span
	for _, sp := range spans {
		switch {
		case sp.start.Before(first.Add(hold - 200*time.Millisecond)):
			during = append(during, sp)
		case sp.start.After(first.Add(hold + recover + 200*time.Millisecond)):
			after = append(after, sp)
		}
	}
	// Halved: 10/s while held (the first refusals came at once, in the
	// burst); back to 20/s once recovered.
	assert.LessOrEqual(t, mostStartsIn(during, time.Second), 11, "the rate was not halved while held")
	require.NotEmpty(t, after, "no send after the recovery")
	assert.Greater(t, mostStartsIn(after, time.Second), 12, "the rate did not recover")
	stat, err := st.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1.0, stat[0].Factor)
}

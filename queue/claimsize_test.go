package queue

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClaimLimitFollowsTheSendTime: a claim takes what the worker's sends
// can start within claimHorizon, between Concurrency and Batch.
func TestClaimLimitFollowsTheSendTime(t *testing.T) {
	for _, c := range []struct {
		batch, concurrency int
		sendTime           time.Duration // 0: nothing timed yet
		want               int
	}{
		{200, 8, 0, 16},                      // twice Concurrency to start with
		{200, 8, time.Millisecond, 200},      // a fast relay fills the batch
		{200, 8, 200 * time.Millisecond, 40}, // 8 sends x 5 a second
		{200, 8, 10 * time.Second, 8},        // never below Concurrency
		{5, 8, 10 * time.Second, 5},          // nor above Batch
		{5, 8, 0, 5},
	} {
		w := &Worker{opts: WorkerOptions{Batch: c.batch, Concurrency: c.concurrency}}
		if c.sendTime > 0 {
			w.timeSend(c.sendTime)
		}
		assert.Equal(t, c.want, w.claimLimit(), "batch %d, concurrency %d, sends of %v", c.batch, c.concurrency, c.sendTime)
	}

	// The average moves an eighth of the way to each new send time.
	w := &Worker{opts: WorkerOptions{Batch: 200, Concurrency: 8}}
	w.timeSend(800 * time.Millisecond)
	w.timeSend(160 * time.Millisecond)
	assert.Equal(t, int64(720*time.Millisecond), w.sendTime.Load())
}

// TestSlowSendsClaimSmallBatches: with sends of 250 ms and 2 at once, a
// worker holds no more than it can start within about a second (8 rows)
// once it has timed a send, however large Batch is, and still sends
// everything.
func TestSlowSendsClaimSmallBatches(t *testing.T) {
	t.Parallel()
	_, q, tr, rec := slowSetup(t, 30, 250*time.Millisecond)
	obs := rec.observer()
	w, err := NewWorker(q, tr, &WorkerOptions{Batch: 200, Concurrency: 2, MaxMessages: 30, PollInterval: 10 * time.Millisecond,
		CleanupInterval: -1, Observer: obs, Logger: quietLogger()})
	require.NoError(t, err)
	require.NoError(t, w.Run(context.Background()))

	claims := rec.sizes()
	require.NotEmpty(t, claims)
	assert.Equal(t, 4, claims[0], "twice Concurrency before any send is timed")
	for i, n := range claims[1:] {
		assert.LessOrEqual(t, n, 8, "claim %d of %v", i+2, claims)
	}
	assert.Equal(t, int64(30), w.Stats().Sent)
}

// TestRowsThatCannotStartSoonGoBack: a claim sized while sends were fast
// (12 rows) meets a provider that now takes half a second per mail, one
// at a time: the rows that could not start within startWait are given back,
// unsent and with no attempt spent, and are sent later, each once.
func TestRowsThatCannotStartSoonGoBack(t *testing.T) {
	t.Parallel()
	s, q, tr, rec := slowSetup(t, 12, 500*time.Millisecond)
	obs := rec.observer()
	w, err := NewWorker(q, tr, &WorkerOptions{Batch: 12, Concurrency: 1, PollInterval: 10 * time.Millisecond,
		CleanupInterval: -1, Observer: obs, Logger: quietLogger()})
	require.NoError(t, err)
	w.timeSend(time.Microsecond) // sends were fast when the first claim was sized
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); assert.NoError(t, w.Run(ctx)) }()
	waitProgress(t, "sent", 20*time.Second, 12, func() int { return int(w.Stats().Sent) })
	cancel()
	<-done

	claims := rec.sizes()
	require.NotEmpty(t, claims)
	assert.Equal(t, 12, claims[0], "the first claim takes the whole batch")
	assert.GreaterOrEqual(t, w.Stats().Released, int64(6), "rows that could not start within %v went back", startWait)
	for id, n := range tr.sends {
		assert.Equal(t, 1, n, "mail %s sent once", id)
	}
	assert.Len(t, tr.sends, 12)
	assert.Equal(t, 12, countRows(t, s.db, q.table, "status = 2"))
}

// slowSetup enqueues n mails on SQLite behind a transport whose every send
// takes d, and records the size of each claim that took rows.
func slowSetup(t *testing.T, n int, d time.Duration) (store, *Queue, *funcTransport, *claimRecorder) {
	s := newSQLiteStore(t)
	q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
	enqueueN(t, q, n)
	tr := newFuncTransport(func(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
		time.Sleep(d)
		return transport.Receipt{MessageID: m.MessageID}, nil
	})
	return s, q, tr, &claimRecorder{}
}

type claimRecorder struct {
	mu     sync.Mutex
	claims []int
}

func (r *claimRecorder) observer() *Observer {
	return &Observer{ClaimFunc: func(e ClaimEvent) {
		if e.Rows > 0 {
			r.mu.Lock()
			r.claims = append(r.claims, e.Rows)
			r.mu.Unlock()
		}
	}}
}

func (r *claimRecorder) sizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.claims...)
}

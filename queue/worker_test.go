package queue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// funcTransport is a Transport whose Send is a function, counting sends
// per Message-ID.
type funcTransport struct {
	sendFunc func(ctx context.Context, m *transport.Message) (transport.Receipt, error)
	mu       sync.Mutex
	sends    map[string]int
	total    atomic.Int64
}

func newFuncTransport(f func(ctx context.Context, m *transport.Message) (transport.Receipt, error)) *funcTransport {
	return &funcTransport{sendFunc: f, sends: map[string]int{}}
}

func (f *funcTransport) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	f.mu.Lock()
	f.sends[m.MessageID]++
	f.mu.Unlock()
	f.total.Add(1)
	if f.sendFunc == nil {
		return transport.Receipt{MessageID: "<" + m.MessageID + ">"}, nil
	}
	return f.sendFunc(ctx, m)
}

func (f *funcTransport) Close() error { return nil }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// problemLog is a logger that keeps the warnings and errors it is given.
// onDeadlock, when set, is called (once) with the first line that reports
// a MySQL deadlock, while the server still has it as its latest.
type problemLog struct {
	mu         sync.Mutex
	lines      []string
	onDeadlock func(line string)
	deadlocked bool
}

func (p *problemLog) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(p, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func (p *problemLog) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines = append(p.lines, string(b))
	if p.onDeadlock != nil && !p.deadlocked && strings.Contains(string(b), "Error 1213") {
		p.deadlocked = true
		p.onDeadlock(string(b))
	}
	return len(b), nil
}

func (p *problemLog) Lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// oneBatch claims up to limit rows, sends them and records the outcomes:
// one batch, start to finish, so tests can drive a worker step by step.
func oneBatch(ctx context.Context, w *Worker, limit int) (int, error) {
	stop := w.startSenders()
	defer stop()
	n, done, err := w.dispatch(ctx, limit)
	if done != nil {
		err = errors.Join(err, <-done)
	}
	return n, err
}

func enqueueN(t testing.TB, q *Queue, n int) []int64 {
	t.Helper()
	ctx := context.Background()
	tx, err := q.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	ids := make([]int64, n)
	for i := range n {
		ids[i], err = q.Enqueue(ctx, tx, testMessage("user"+strconv.Itoa(i)+"@example.com"))
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit())
	return ids
}

func TestFourWorkersDrainEachMailExactlyOnce(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		drain(t, s, 4, 10000)
	})
}

// TestSixteenWorkersDrainWithoutDeadlocks: claims read only the pending
// and retry ranges with SKIP LOCKED and expired leases are rescued apart,
// so sixteen claimers never deadlock (MariaDB).
func TestSixteenWorkersDrainWithoutDeadlocks(t *testing.T) {
	drain(t, newMariaDBStore(t), 16, 5000)
}

// drain has workers drain n mails and checks each was sent and recorded
// exactly once, with no deadlock, lock wait or stale completion. It waits
// for progress: it fails only if no mail is sent for 30 s. On MariaDB, the
// first deadlock a worker logs is printed with the server's account of it
// (latestDeadlock). It returns the deadlocks and lock wait timeouts the
// workers counted.
func drain(t *testing.T, s store, workerCount, n int) (deadlocks int64) {
	t.Helper()
	{
		lane := Lane{RecipientLimit: NoLimit}
		q := newQueue(t, s.db, lane, nil)
		enqueueN(t, q, n)
		tr := newFuncTransport(nil)

		ctx, cancel := context.WithCancel(context.Background())
		var problems problemLog
		var deadlock string
		if s.name == "mariadb" {
			problems.onDeadlock = func(line string) { deadlock = line + latestDeadlock(s.db) }
		}
		var wg sync.WaitGroup
		defer func() {
			if t.Failed() {
				for _, l := range problems.Lines() {
					t.Log(l)
				}
			}
			if deadlock != "" {
				t.Log(deadlock)
			}
		}()
		defer wg.Wait() // even when the test fails early: no worker outlives it
		defer cancel()
		workers := make([]*Worker, workerCount)
		for i := range workers {
			db := s.open(t) // each worker on its own connections
			w, err := NewWorker(newQueue(t, db, lane, nil), tr, &WorkerOptions{
				ID: "w" + strconv.Itoa(i), Batch: 100, Concurrency: 8, PollInterval: 20 * time.Millisecond,
				// This test is about concurrent claims; on a loaded machine an
				// SQLite writer (a heartbeat) can starve for 20 s.
				LeaseMargin: time.Minute, Logger: problems.logger(),
			})
			require.NoError(t, err)
			workers[i] = w
			wg.Add(1)
			go func() { defer wg.Done(); assert.NoError(t, w.Run(ctx)) }()
		}
		start := time.Now()
		waitProgress(t, "drain", 30*time.Second, n, func() int { return countRows(t, s.db, q.table, "status = 2") })
		t.Logf("%d workers drained %d mails in %v", workerCount, n, time.Since(start).Round(time.Millisecond))
		cancel()
		wg.Wait()

		// SQLite serialises writers: on a loaded machine (and under -race) a
		// writer can wait past the busy timeout; the worker then retries,
		// which is what it is for. MariaDB must show no lock trouble at all.
		var problemLines []string
		for _, l := range problems.Lines() {
			if s.name == "sqlite" && (strings.Contains(l, "database is locked") || strings.Contains(l, "context deadline exceeded") || strings.Contains(l, "slow to grant locks")) {
				continue
			}
			problemLines = append(problemLines, l)
		}
		assert.Empty(t, problemLines, "no deadlock, lock wait or stale completion was logged")
		assert.Len(t, tr.sends, n)
		for id, c := range tr.sends {
			if c != 1 {
				t.Errorf("message %s sent %d times", id, c)
			}
		}
		var sent int64
		for _, w := range workers {
			st := w.Stats()
			sent += st.Sent
			assert.Zero(t, st.Stale)
			assert.Zero(t, st.Deadlocks)
			deadlocks += st.Deadlocks
			if s.name != "sqlite" {
				assert.Zero(t, st.DBErrors)
			}
			t.Logf("worker %s: %+v", w.ID(), st)
		}
		assert.Equal(t, int64(n), sent)
		assert.Equal(t, 0, countRows(t, s.db, q.table, "status <> 2 OR locked_by <> ''"))
		assert.Equal(t, n, countRows(t, s.db, q.table, "provider_id LIKE '<%'"), "provider ids stored")
	}
	return deadlocks
}

func TestStaleCompletionIsRejected(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		q := newQueue(t, s.db, Lane{}, clock)
		id := enqueueN(t, q, 1)[0]

		slow, err := q.claim(ctx, "slow.1", 10, time.Minute, nil)
		require.NoError(t, err)
		require.Len(t, slow, 1)

		clock.Advance(time.Minute + time.Millisecond) // slow's lease has ended
		none, err := q.claim(ctx, "fast.1", 10, time.Minute, nil)
		require.NoError(t, err)
		require.Empty(t, none, "a claim never takes a sending row, expired or not")
		rescued, _, err := q.rescue(ctx, 10, nil, time.Minute)
		require.NoError(t, err)
		require.Equal(t, 1, rescued)
		fast, err := q.claim(ctx, "fast.2", 10, time.Minute, nil)
		require.NoError(t, err)
		require.Len(t, fast, 1, "a rescued row is claimable again")
		assert.Equal(t, 1, fast[0].attempts, "the lost lease's attempt was given back")
		assert.Equal(t, 1, fast[0].crashes, "and counted as a crash")
		assert.True(t, fast[0].maybeDelivered)

		sent := rowUpdate{id: id, status: StatusSent, attempts: 1, hasOutcome: true, nextRun: clock.Now().UnixMilli(), sentAt: clock.Now().UnixMilli(), lastKind: "sent", providerID: "slow-id"}
		applied, err := q.complete(ctx, "slow.1", []rowUpdate{sent})
		require.NoError(t, err)
		assert.Equal(t, 0, applied, "the stale worker's write is rejected")
		r := readRow(t, q, id)
		assert.Equal(t, StatusSending, r.Status)
		assert.Equal(t, "fast.2", r.LockedBy)

		sent.providerID = "fast-id"
		applied, err = q.complete(ctx, "fast.2", []rowUpdate{sent})
		require.NoError(t, err)
		assert.Equal(t, 1, applied)
		r = readRow(t, q, id)
		assert.Equal(t, StatusSent, r.Status)
		assert.Equal(t, "fast-id", r.ProviderID)
		assert.Empty(t, r.LockedBy)
	})
}

func TestFreshMailIsNotStarvedByRetries(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, clock)
		old := enqueueN(t, q, 300)
		// Turn them into a due retry backlog.
		_, err := s.db.Exec(rebindFor(t, s.db, `UPDATE `+q.table+` SET status = 3, attempts = 1, next_run = ?`), clock.Now().Add(-time.Hour).UnixMilli())
		require.NoError(t, err)
		clock.Advance(time.Second)
		fresh := enqueueN(t, q, 5)

		jobs, err := q.claim(ctx, "t.1", 50, time.Minute, nil)
		require.NoError(t, err)
		require.Len(t, jobs, 50)
		var got []int64
		for _, j := range jobs[:5] {
			got = append(got, j.id)
		}
		assert.Equal(t, fresh, got, "pending mail comes first")
		assert.Equal(t, old[0], jobs[5].id, "then the oldest due retry")
	})
}

func TestWorkerCancelLeavesNothingSending(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
		enqueueN(t, q, 40)
		started := make(chan struct{}, 100)
		answer := make(chan struct{}) // the provider answers once Run is cancelled
		tr := newFuncTransport(func(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
			started <- struct{}{}
			select {
			case <-answer:
				return transport.Receipt{MessageID: m.MessageID}, nil
			case <-ctx.Done():
				return transport.Receipt{}, ctx.Err()
			}
		})
		w, err := NewWorker(q, tr, &WorkerOptions{Batch: 40, Concurrency: 4, ShutdownTimeout: 5 * time.Second, Logger: quietLogger()})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); assert.NoError(t, w.Run(ctx)) }()
		for range 4 {
			<-started
		}
		cancel() // SIGTERM
		close(answer)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return after cancel")
		}
		assert.Equal(t, 0, countRows(t, s.db, q.table, "status = 1"), "rows left in sending")
		st := w.Stats()
		assert.EqualValues(t, 4, st.Sent, "the four sends in flight finished")
		assert.EqualValues(t, st.Claimed-4, st.Released, "the rest of the claim was given back")
		assert.Equal(t, 36, countRows(t, s.db, q.table, "status = 0 AND attempts = 0 AND locked_by = ''"), "released rows are pending again, attempt not spent")
	})
}

func TestWorkerRecyclesAfterMaxMessages(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
		enqueueN(t, q, 30)
		tr := newFuncTransport(nil)
		w, err := NewWorker(q, tr, &WorkerOptions{Batch: 8, MaxMessages: 20, Logger: quietLogger()})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, w.Run(ctx))
		require.NoError(t, ctx.Err(), "Run returned on its own")
		assert.EqualValues(t, 20, tr.total.Load())
		assert.Equal(t, 10, countRows(t, s.db, q.table, "status = 0"))
	})
}

func TestBreakerPausesTheLaneWithoutBurningAttempts(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		lane := Lane{RecipientLimit: NoLimit, Retry: RetryPolicy{BreakerThreshold: 3, BreakerPause: time.Minute, BreakerMaxPause: 4 * time.Minute}}
		q := newQueue(t, s.db, lane, clock)
		enqueueN(t, q, 20)
		var down atomic.Bool
		down.Store(true)
		tr := newFuncTransport(func(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
			if down.Load() {
				return transport.Receipt{}, &transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane, Detail: "connection refused"}
			}
			return transport.Receipt{MessageID: m.MessageID}, nil
		})
		w, err := NewWorker(q, tr, &WorkerOptions{Batch: 20, Concurrency: 1, Logger: quietLogger()})
		require.NoError(t, err)

		n, err := oneBatch(ctx, w, 20)
		require.NoError(t, err)
		assert.Equal(t, 20, n)
		assert.EqualValues(t, 3, tr.total.Load(), "three connection failures open the breaker; the rest are not tried")
		assert.EqualValues(t, 17, w.Stats().Released)
		assert.Equal(t, 1, countRows(t, s.db, q.table, "attempts > 0"), "an outage spends no attempts after its first failure")
		assert.Equal(t, 0, countRows(t, s.db, q.table, "status = 1"))

		pause, limit := w.brk.state(clock.Now(), 20)
		assert.Equal(t, time.Minute, pause)
		assert.Equal(t, 0, limit)

		// After the pause a single probe; it fails: twice the pause.
		clock.Advance(time.Minute)
		_, limit = w.brk.state(clock.Now(), 20)
		require.Equal(t, 1, limit)
		clock.Advance(time.Hour) // let the released rows come due
		_, err = oneBatch(ctx, w, limit)
		require.NoError(t, err)
		assert.EqualValues(t, 4, tr.total.Load())
		pause, _ = w.brk.state(clock.Now(), 20)
		assert.Equal(t, 2*time.Minute, pause)

		// The provider is back: the probe succeeds and full batches resume.
		down.Store(false)
		clock.Advance(2 * time.Minute)
		_, limit = w.brk.state(clock.Now(), 20)
		require.Equal(t, 1, limit)
		clock.Advance(3 * time.Hour)
		_, err = oneBatch(ctx, w, limit)
		require.NoError(t, err)
		_, limit = w.brk.state(clock.Now(), 20)
		assert.Equal(t, 20, limit, "breaker closed")
		for range 3 {
			_, err = oneBatch(ctx, w, limit)
			require.NoError(t, err)
		}
		assert.Equal(t, 20, countRows(t, s.db, q.table, "status = 2"))
		assert.Equal(t, 19, countRows(t, s.db, q.table, "attempts = 1"), "each mail spent only the attempt that delivered it…")
		assert.Equal(t, 1, countRows(t, s.db, q.table, "attempts = 2"), "…but the one whose failure began the outage")
	})
}

func TestRecipientRejectionsNeverOpenTheBreaker(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		lane := Lane{RecipientLimit: NoLimit, Retry: RetryPolicy{BreakerThreshold: 3, BreakerPause: time.Minute, BreakerMaxPause: 4 * time.Minute}}
		q := newQueue(t, s.db, lane, clock)
		enqueueN(t, q, 20)
		// 20 replies in a row about one recipient each, all of them given
		// the kind that feeds the breaker (as an operator's rule may).
		tr := newFuncTransport(func(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
			return transport.Receipt{}, &transport.Error{Kind: transport.Connection, Code: 550, Enhanced: "5.2.1", Scope: transport.ScopeRecipient,
				Rule: "operator:disabled-is-ours", Detail: "The email account that you tried to reach is disabled."}
		})
		w, err := NewWorker(q, tr, &WorkerOptions{Batch: 20, Concurrency: 1, Logger: quietLogger()})
		require.NoError(t, err)

		got, err := oneBatch(ctx, w, 20)
		require.NoError(t, err)
		assert.Equal(t, 20, got)
		assert.EqualValues(t, 20, tr.total.Load(), "every mail was tried: the lane kept running")
		assert.EqualValues(t, 0, w.Stats().Released)
		assert.Equal(t, 0, countRows(t, s.db, q.table, "status = 1"))
		pause, limit := w.brk.state(clock.Now(), 20)
		assert.Equal(t, time.Duration(0), pause, "the breaker stayed closed")
		assert.Equal(t, 20, limit)
		row, err := q.Row(ctx, 1)
		require.NoError(t, err)
		assert.Equal(t, "operator:disabled-is-ours", row.LastRule, "the rule that decided is stored with the row")
		assert.Equal(t, "recipient", row.LastScope, "and the scope")

		// A lane-level failure still counts: three in a row open it.
		for range 3 {
			streak, _ := w.brk.record(isLaneFailure(&transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane, Code: 535, Detail: "authentication failed"}), clock.Now())
			require.Positive(t, streak)
		}
		pause, _ = w.brk.state(clock.Now(), 20)
		assert.Equal(t, time.Minute, pause)
	})
}

func TestLaneFailure(t *testing.T) {
	assert.True(t, isLaneFailure(&transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane, Detail: "connection refused"}))
	assert.True(t, isLaneFailure(fmt.Errorf("wrapped: %w", &transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane, Code: 535})))
	assert.False(t, isLaneFailure(&transport.Error{Kind: transport.Connection, Code: 550, Scope: transport.ScopeRecipient}))
	// Our sender or account refused: the lane's alert, not its breaker.
	assert.False(t, isLaneFailure(&transport.Error{Kind: transport.Connection, Code: 550, Scope: transport.ScopeSender}))
	assert.False(t, isLaneFailure(&transport.Error{Kind: transport.Connection, Code: 550, Scope: transport.ScopeMessage}))
	assert.False(t, isLaneFailure(&transport.Error{Kind: transport.Connection, Scope: transport.ScopeTransient}))
	assert.False(t, isLaneFailure(&transport.Error{Kind: transport.Permanent, Code: 550}))
	assert.False(t, isLaneFailure(nil))
	assert.False(t, isLaneFailure(io.EOF), "an unclassified error is Temporary")
}

func TestWorkerOutcomesOnRows(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, clock)
		replies := map[string]error{
			"user0@example.com": nil,
			"user1@example.com": &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeRecipient, Code: 550, Enhanced: "5.1.1", Detail: "no such user"},
			"user2@example.com": &transport.Error{Kind: transport.Temporary, Code: 451, Enhanced: "4.3.0", Detail: "try later", MaybeDelivered: true},
			"user3@example.com": &transport.Error{Kind: transport.Temporary, Code: 429, RetryAfter: 3 * time.Hour},
			"user4@example.com": fmt.Errorf("something nobody classified"),
		}
		tr := newFuncTransport(func(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
			if err := replies[m.To.Address]; err != nil {
				return transport.Receipt{}, err
			}
			return transport.Receipt{MessageID: "prov-1"}, nil
		})
		ids := enqueueN(t, q, 5)
		w, err := NewWorker(q, tr, &WorkerOptions{Logger: quietLogger()})
		require.NoError(t, err)
		_, err = oneBatch(ctx, w, 10)
		require.NoError(t, err)
		now := clock.Now()

		r := readRow(t, q, ids[0])
		assert.Equal(t, StatusSent, r.Status)
		assert.Equal(t, "prov-1", r.ProviderID)

		r = readRow(t, q, ids[1])
		assert.Equal(t, StatusFailed, r.Status, "550 fails at once")
		assert.Equal(t, "permanent", r.LastKind)
		assert.Equal(t, 550, r.LastCode)
		assert.Contains(t, r.LastError, "5.1.1 no such user")

		r = readRow(t, q, ids[2])
		assert.Equal(t, StatusRetry, r.Status)
		assert.Equal(t, 1, r.MaybeDelivered)
		assert.GreaterOrEqual(t, r.NextRun, now.Add(2*time.Minute).UnixMilli())
		assert.LessOrEqual(t, r.NextRun, now.Add(144*time.Second).UnixMilli(), "2m + at most 20%")

		r = readRow(t, q, ids[3])
		assert.Equal(t, StatusRetry, r.Status)
		assert.Equal(t, now.Add(3*time.Hour).UnixMilli(), r.NextRun, "RetryAfter beats the shorter schedule")

		r = readRow(t, q, ids[4])
		assert.Equal(t, StatusRetry, r.Status, "unclassified errors are temporary")
		assert.Equal(t, "temporary", r.LastKind)
	})
}

func TestExpiredMailIsFailedUnsent(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		q := newQueue(t, s.db, Lane{}, clock)
		id, err := q.Enqueue(ctx, s.db, testMessage("late@example.com"), NotAfter(clock.Now().Add(10*time.Minute)))
		require.NoError(t, err)
		clock.Advance(11 * time.Minute) // e.g. the workers were down
		tr := newFuncTransport(nil)
		w, err := NewWorker(q, tr, &WorkerOptions{Logger: quietLogger()})
		require.NoError(t, err)
		_, err = oneBatch(ctx, w, 10)
		require.NoError(t, err)
		assert.Zero(t, tr.total.Load(), "never sent late")
		r := readRow(t, q, id)
		assert.Equal(t, StatusFailed, r.Status)
		assert.Equal(t, kindExpired, r.LastKind)
		assert.Equal(t, 0, r.Attempts)
		assert.Contains(t, r.LastError, "not-after")
	})
}

func TestSlowSendDoesNotHoldUpTheWorker(t *testing.T) {
	t.Parallel()
	s := newSQLiteStore(t)
	q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
	enqueueN(t, q, 30)
	release := make(chan struct{})
	tr := newFuncTransport(func(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
		if m.To.Address == "user0@example.com" {
			select { // a provider that takes its time over this one mail
			case <-release:
			case <-ctx.Done():
				return transport.Receipt{}, ctx.Err()
			}
		}
		return transport.Receipt{MessageID: m.MessageID}, nil
	})
	w, err := NewWorker(q, tr, &WorkerOptions{Batch: 10, Concurrency: 4, PollInterval: 10 * time.Millisecond, Logger: quietLogger()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); assert.NoError(t, w.Run(ctx)) }()

	// While the first batch waits for its slow send, later batches go on,
	// and the slow send's batch-mates are recorded without waiting for it.
	require.Eventually(t, func() bool { return countRows(t, s.db, q.table, "status = 2") == 29 }, 20*time.Second, 10*time.Millisecond)
	assert.EqualValues(t, 30, tr.total.Load(), "every mail was handed to the transport")
	assert.Equal(t, 1, countRows(t, s.db, q.table, "status = 1 AND to_addr = 'user0@example.com'"), "only the slow one is still sending")
	close(release)
	require.Eventually(t, func() bool { return countRows(t, s.db, q.table, "status = 2") == 30 }, 20*time.Second, 10*time.Millisecond)
	cancel()
	<-done
}

// isLaneFailure is laneFailure with the kind taken from err, as send does.
func isLaneFailure(err error) bool { return laneFailure(transport.KindOf(err), err) }

// TestConcurrencyBoundsSendsInFlight: however many rows a worker claims,
// it never has more than Concurrency sends in flight, across batches, and
// it does use all of them. Each send waits (up to 200 ms) until Concurrency
// sends are in flight together, so a worker that used fewer slots would
// still finish, and fail the second assertion.
func TestConcurrencyBoundsSendsInFlight(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		t.Parallel()
		const concurrency, mails = 3, 60
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
		enqueueN(t, q, mails)
		var inFlight, most atomic.Int64
		full := make(chan struct{}, mails)
		tr := newFuncTransport(func(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for cur := most.Load(); n > cur && !most.CompareAndSwap(cur, n); cur = most.Load() {
			}
			if n >= concurrency {
				for range concurrency - 1 {
					select { // let the others go
					case full <- struct{}{}:
					default:
					}
				}
			} else {
				select {
				case <-full:
				case <-time.After(200 * time.Millisecond):
				}
			}
			return transport.Receipt{MessageID: m.MessageID}, nil
		})
		w, err := NewWorker(q, tr, &WorkerOptions{Batch: 20, Concurrency: concurrency, PollInterval: 10 * time.Millisecond, Logger: quietLogger()})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); assert.NoError(t, w.Run(ctx)) }()
		waitProgress(t, "sent", 10*time.Second, mails, func() int { return countRows(t, s.db, q.table, "status = 2") })
		cancel()
		<-done
		assert.LessOrEqual(t, most.Load(), int64(concurrency), "more sends in flight than Concurrency")
		assert.Equal(t, int64(concurrency), most.Load(), "the worker never had Concurrency sends in flight")
	})
}

package queue

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const childDBEnv = "MAILSPOOL_TEST_CHILD_DB"

// TestKilledWorkerLosesNothing runs a worker in a real subprocess, kills it
// with SIGKILL while its sends are in flight, and checks that another
// worker rescues and sends every one of its rows once the lease has
// expired: the lost attempt is given back, counted as a crash, and the row
// is marked maybe delivered.
func TestKilledWorkerLosesNothing(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		lane := Lane{RecipientLimit: NoLimit}
		q := newQueue(t, s.db, lane, nil)
		ids := enqueueN(t, q, 10)

		cmd := exec.Command(os.Args[0], "-test.run=^TestKilledWorkerChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), childDBEnv+"="+s.url)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		require.NoError(t, cmd.Start())
		require.Eventually(t, func() bool {
			return countRows(t, s.db, q.table, "status = 1 AND locked_by LIKE 'child.%'") == 10
		}, 20*time.Second, 20*time.Millisecond, "the child claimed the rows")
		claimedAt := time.Now()
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()

		// The rescuer's own margin (how long it watches a lease stay expired
		// before it takes it) is as short as the child's lease: the rows
		// come back 3 to 6 s after the kill instead of 20 to 23 s, which a
		// loaded machine stretches by another margin whenever one of the
		// rescuer's statements is slow.
		tr := newFuncTransport(nil)
		w, err := NewWorker(q, tr, &WorkerOptions{ID: "rescuer", PollInterval: 100 * time.Millisecond, RescueInterval: 100 * time.Millisecond, LeaseMargin: 3 * time.Second, Logger: quietLogger()})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); assert.NoError(t, w.Run(ctx)) }()
		waitProgress(t, "rescued rows sent", 30*time.Second, 10, func() int { return countRows(t, s.db, q.table, "status = 2") })
		cancel()
		<-done

		assert.GreaterOrEqual(t, time.Since(claimedAt), 2*time.Second, "rows were taken over only after the child's lease (3s past its last heartbeat) ran out")
		assert.Len(t, tr.sends, 10, "each row sent once by the other worker")
		assert.EqualValues(t, 10, w.Stats().Rescued)
		for _, id := range ids {
			r := readRow(t, q, id)
			assert.Equal(t, 1, r.Attempts, "the killed attempt was given back")
			assert.Equal(t, 1, r.Crashes, "and counted as a crash")
			assert.Equal(t, 1, r.MaybeDelivered)
		}
	})
}

// TestKilledWorkerChild is the subprocess of TestKilledWorkerLosesNothing:
// a worker whose sends hang until it is killed.
func TestKilledWorkerChild(t *testing.T) {
	url := os.Getenv(childDBEnv)
	if url == "" {
		return // only runs as the child process
	}
	db, err := dburl.Open(url)
	require.NoError(t, err)
	q := newQueue(t, db, Lane{RecipientLimit: NoLimit}, nil)
	hang := newFuncTransport(func(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
		<-ctx.Done()
		return transport.Receipt{}, ctx.Err()
	})
	// The sends hang for a minute; the heartbeat renews the 3s lease until
	// the process is killed.
	w, err := NewWorker(q, hang, &WorkerOptions{ID: "child", Batch: 10, Concurrency: 10, SendTimeout: time.Minute, LeaseMargin: 3 * time.Second, Logger: quietLogger()})
	require.NoError(t, err)
	_ = w.Run(context.Background()) // killed by the parent
}

// TestCrashAccounting: a lease that expires gives the attempt back and
// counts a crash, so a crash alone never fails a single-attempt mail that
// was never handed over; the third crash fails the row as poison.
func TestCrashAccounting(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		q := newQueue(t, s.db, Lane{}, clock)
		single, err := q.Enqueue(ctx, s.db, testMessage("once@example.com"), MaxAttempts(1))
		require.NoError(t, err)
		for crash := 1; crash <= maxCrashes; crash++ {
			jobs, err := q.claim(ctx, "dead."+strconv.Itoa(crash), 10, time.Minute, nil)
			require.NoError(t, err)
			require.Len(t, jobs, 1)
			clock.Advance(time.Minute + time.Millisecond) // the worker died: its lease runs out
			n, blocked, err := q.rescue(ctx, 10, nil, time.Minute)
			require.NoError(t, err)
			require.Empty(t, blocked)
			require.Equal(t, 1, n)
			r := readRow(t, q, single)
			assert.Equal(t, crash, r.Crashes)
			assert.Equal(t, 0, r.Attempts, "the lost attempt is given back")
			assert.Equal(t, 1, r.MaybeDelivered)
			if crash < maxCrashes {
				assert.Equal(t, StatusPending, r.Status, "a crash alone never fails a MaxAttempts(1) mail")
				continue
			}
			assert.Equal(t, StatusFailed, r.Status)
			assert.Equal(t, kindPoison, r.LastKind)
			assert.Contains(t, r.LastError, "poison: the lease expired while sending this mail 3 times")
		}
	})
}

// TestCrashedRowsAreClaimedAlone: after a lease dies, its rows are leased
// together but apart from ordinary rows; when that lease dies too, each is
// leased alone, so a mail that kills the worker crashes alone and fails as
// poison while the batch-mates it took down are sent.
func TestCrashedRowsAreClaimedAlone(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		q := newQueue(t, s.db, Lane{}, clock)
		ids := enqueueN(t, q, 4)
		jobs, err := q.claim(ctx, "dead.1", 10, time.Minute, nil)
		require.NoError(t, err)
		require.Len(t, jobs, 4)
		clock.Advance(time.Minute + time.Millisecond)
		n, _, err := q.rescue(ctx, 10, nil, time.Minute)
		require.NoError(t, err)
		require.Equal(t, 4, n)
		fresh := enqueueN(t, q, 2)

		jobs, err = q.claim(ctx, "dead.2", 10, time.Minute, nil)
		require.NoError(t, err)
		assert.Equal(t, ids, jobIDs(jobs), "rows that crashed once are leased together, without the fresh ones")
		clock.Advance(time.Minute + time.Millisecond)
		n, _, err = q.rescue(ctx, 10, nil, time.Minute)
		require.NoError(t, err)
		require.Equal(t, 4, n)

		// The fresh rows are due first now (the crashed ones since the
		// second rescue).
		jobs, err = q.claim(ctx, "next.fresh", 10, time.Minute, nil)
		require.NoError(t, err)
		assert.Equal(t, fresh, jobIDs(jobs), "rows that never crashed are still claimed together")
		for i, id := range ids {
			jobs, err := q.claim(ctx, "next."+strconv.Itoa(i), 10, time.Minute, nil)
			require.NoError(t, err)
			require.Len(t, jobs, 1, "a row that crashed twice is leased alone")
			assert.Equal(t, id, jobs[0].id)
		}
	})
}

// TestRescueSkipsLiveLeases: a lease that has not expired, or that the
// caller says is its own, is never rescued.
func TestRescueSkipsLiveLeases(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, clock)
		enqueueN(t, q, 4)
		_, err := q.claim(ctx, "mine.1", 2, time.Minute, nil)
		require.NoError(t, err)
		_, err = q.claim(ctx, "live.1", 2, 2*time.Minute, nil)
		require.NoError(t, err)
		clock.Advance(time.Minute + time.Millisecond)
		n, _, err := q.rescue(ctx, 10, func(token string) bool { return token == "mine.1" }, time.Minute)
		require.NoError(t, err)
		assert.Zero(t, n)
		assert.Equal(t, 4, countRows(t, s.db, q.table, "status = 1"))
	})
}

// TestCrashedRowsDrainWithoutPollWaits: a claim cut short to lease a
// suspect alone leaves due rows behind, so the worker claims again at once
// rather than after its poll interval (here an hour): the rows a killed
// worker held, a whole batch of them, are sent in a row.
func TestCrashedRowsDrainWithoutPollWaits(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
		const n = 30
		enqueueN(t, q, n)
		// As the rescuer leaves the rows of a lease that expired.
		_, err := s.db.ExecContext(ctx, `UPDATE `+q.table+` SET crashes = 1, maybe_delivered = 1`)
		require.NoError(t, err)
		tr := newFuncTransport(nil)
		w, err := NewWorker(q, tr, &WorkerOptions{PollInterval: time.Hour, Logger: quietLogger()})
		require.NoError(t, err)
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(runCtx) }()
		waitProgress(t, "suspects sent", 20*time.Second, n, func() int { return int(w.Stats().Sent) })
		cancel()
		require.NoError(t, <-done)
		assert.Equal(t, n, countRows(t, s.db, q.table, "status = 2"))
	})
}

// TestSuspectIsSentAlone: a suspect row is not sent while another batch of
// the same worker is still in flight, so that if it kills the process no
// other row is counted as crashed with it (and failed as poison after
// maxCrashes such deaths).
func TestSuspectIsSentAlone(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
		enqueueN(t, q, 3)
		var blocked atomic.Int32
		gate := make(chan struct{})
		busyAtSuspect := make(chan int32, 1)
		tr := newFuncTransport(func(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
			if m.To.Address == "suspect@example.com" {
				busyAtSuspect <- blocked.Load()
			} else {
				blocked.Add(1)
				<-gate
				blocked.Add(-1)
			}
			return transport.Receipt{MessageID: "<" + m.MessageID + ">"}, nil
		})
		w, err := NewWorker(q, tr, &WorkerOptions{PollInterval: 10 * time.Millisecond, Logger: quietLogger()})
		require.NoError(t, err)
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(runCtx) }()
		defer func() { cancel(); <-done }()
		waitProgress(t, "first batch sending", 20*time.Second, 3, func() int { return int(blocked.Load()) })

		// The suspect appears already marked: enqueued and marked in one
		// transaction, so the worker cannot claim it as an ordinary mail in
		// between (it did once, on a loaded CI machine).
		tx, err := s.db.BeginTx(ctx, nil)
		require.NoError(t, err)
		id, err := q.Enqueue(ctx, tx, testMessage("suspect@example.com"))
		require.NoError(t, err)
		_, err = tx.ExecContext(ctx, rebindFor(t, s.db, `UPDATE `+q.table+` SET crashes = 1 WHERE id = ?`), id)
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		time.Sleep(300 * time.Millisecond) // time enough to claim it, were it allowed to go
		close(gate)
		select {
		case busy := <-busyAtSuspect:
			assert.Zero(t, busy, "the suspect's send started while the first batch's sends were in flight")
		case <-time.After(30 * time.Second):
			t.Fatal("the suspect was never sent")
		}
	})
}

// TestSuspectsAreSentInParallel: the rows a killed worker held come back
// as suspects (crashed once) and are sent together, up to the worker's
// concurrency, not one at a time: here all four are in flight at once
// before any is answered. A claim leases at most Concurrency of them, and
// none beside an ordinary row; a suspect that crashed twice goes alone.
func TestSuspectsAreSentInParallel(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
		const n = 4
		enqueueN(t, q, n)
		_, err := s.db.ExecContext(ctx, `UPDATE `+q.table+` SET crashes = 1, maybe_delivered = 1`)
		require.NoError(t, err)
		var inFlight atomic.Int32
		gate := make(chan struct{})
		tr := newFuncTransport(func(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
			inFlight.Add(1)
			<-gate
			return transport.Receipt{MessageID: "<" + m.MessageID + ">"}, nil
		})
		w, err := NewWorker(q, tr, &WorkerOptions{Concurrency: n, PollInterval: 10 * time.Millisecond, Logger: quietLogger()})
		require.NoError(t, err)
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(runCtx) }()
		waitProgress(t, "suspects sending together", 20*time.Second, n, func() int { return int(inFlight.Load()) })
		close(gate)
		waitProgress(t, "suspects sent", 20*time.Second, n, func() int { return int(w.Stats().Sent) })
		cancel()
		require.NoError(t, <-done)
	})
}

func TestIsolateSuspects(t *testing.T) {
	jobsOf := func(crashes ...int) []*job {
		var out []*job
		for i, c := range crashes {
			out = append(out, &job{id: int64(i + 1), crashes: c})
		}
		return out
	}
	for _, c := range []struct {
		crashes []int
		most    int
		want    int
	}{
		{[]int{0, 0, 0}, 2, 3},    // ordinary rows: the whole claim
		{[]int{0, 1, 0}, 0, 1},    // ordinary rows up to the first suspect
		{[]int{1, 1, 1, 0}, 0, 3}, // suspects that crashed once, together
		{[]int{1, 1, 1, 1}, 2, 2}, // at most the claimer's concurrency
		{[]int{1, 2, 1}, 0, 1},    // not with one that crashed twice
		{[]int{2, 1, 1}, 0, 1},    // which goes alone
	} {
		assert.Len(t, isolateSuspects(jobsOf(c.crashes...), c.most), c.want, "%v most %d", c.crashes, c.most)
	}
}

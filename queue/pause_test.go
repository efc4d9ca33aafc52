package queue

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitProgress waits until count() reaches want, failing the test only
// when count() has not changed for stall: on a loaded machine a test waits
// for progress, not for a budget sized for an idle one.
func waitProgress(t testing.TB, what string, stall time.Duration, want int, count func() int) {
	t.Helper()
	last, since := -1, time.Now()
	for {
		n := count()
		if n >= want {
			return
		}
		if n != last {
			last, since = n, time.Now()
		} else if time.Since(since) > stall {
			t.Fatalf("%s: stuck at %d of %d for %v", what, n, want, stall)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pauseStore makes the database unwritable from other connections until
// the returned function is called: MariaDB holds LOCK TABLES ... WRITE on
// the table (reads wait too), PostgreSQL LOCK TABLE in ACCESS EXCLUSIVE
// mode (reads wait too), SQLite holds BEGIN IMMEDIATE (readers go on).
func pauseStore(t *testing.T, s store, table string) (resume func()) {
	t.Helper()
	ctx := context.Background()
	db := s.open(t)
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	lock, unlock := "LOCK TABLES "+table+" WRITE", "UNLOCK TABLES"
	switch s.name {
	case "sqlite":
		lock, unlock = "BEGIN IMMEDIATE", "ROLLBACK"
	case "postgres":
		_, err = conn.ExecContext(ctx, "BEGIN")
		require.NoError(t, err)
		lock, unlock = "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE", "ROLLBACK"
	}
	_, err = conn.ExecContext(ctx, lock)
	require.NoError(t, err)
	var once sync.Once
	resume = func() {
		once.Do(func() {
			_, err := conn.ExecContext(ctx, unlock)
			assert.NoError(t, err)
			conn.Close()
		})
	}
	t.Cleanup(resume)
	return resume
}

// TestDatabasePauseResendsNothing pauses the database for 20s while a
// worker's sends are in flight, longer than the statement bound (MariaDB
// 5s, SQLite's busy timeout 10s) and the lease (3s past the last heartbeat),
// with a second worker running beside it whose rescuer would take over
// expired leases. The first worker keeps its outcomes and retries them; the
// second must not rescue leases whose owner could not renew them during the
// pause. Every mail is sent exactly once and recorded once.
func TestDatabasePauseResendsNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		failed := runThroughPause(t, s, 20*time.Second, func() func() { return pauseStore(t, s, q(t, s).table) })
		assert.Positive(t, failed, "the pause made outcome writes fail (and be retried)")
	})
}

// TestRowLocksOnOtherRowsResendNothing holds FOR UPDATE locks on other
// rows of the table for 8s while a worker's sends finish (MariaDB).
func TestRowLocksOnOtherRowsResendNothing(t *testing.T) {
	s := newMariaDBStore(t)
	other := enqueueN(t, q(t, s), 10)
	_, err := s.db.Exec(`UPDATE `+q(t, s).table+` SET next_run = next_run + 3600000 WHERE id <= ?`, other[len(other)-1])
	require.NoError(t, err)
	runThroughPause(t, s, 8*time.Second, func() func() {
		tx, err := s.open(t).Begin()
		require.NoError(t, err)
		rows, err := tx.Query(`SELECT id FROM `+q(t, s).table+` WHERE id <= ? FOR UPDATE`, other[len(other)-1])
		require.NoError(t, err)
		rows.Close()
		return func() { _ = tx.Rollback() }
	})
}

func q(t *testing.T, s store) *Queue { return newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil) }

// runThroughPause enqueues 40 mails, lets one worker claim them all (sends
// end 1s after the pause began, all 40 at once), pauses the store with pauseFunc for pause while a
// second worker runs, and checks that each mail was sent and recorded once.
// It returns how often writing outcomes failed.
func runThroughPause(t *testing.T, s store, pause time.Duration, pauseFunc func() (resume func())) (failedWrites int) {
	t.Helper()
	queue := q(t, s)
	before := countRows(t, s.db, queue.table, "1 = 1")
	enqueueN(t, queue, 40)
	// The sends end 1s into the pause, however long the claim and the
	// pause's setup took: their outcomes always meet the paused store.
	paused := make(chan struct{})
	tr := newFuncTransport(func(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
		select {
		case <-paused:
		case <-ctx.Done():
			return transport.Receipt{}, ctx.Err()
		}
		select {
		case <-time.After(time.Second):
			return transport.Receipt{MessageID: "<" + m.MessageID + ">"}, nil
		case <-ctx.Done():
			return transport.Receipt{}, ctx.Err()
		}
	})
	var problems problemLog
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait() // even when the test fails early: no worker outlives it
	defer cancel()
	start := func(id string) *Worker {
		w, err := NewWorker(q(t, s), tr, &WorkerOptions{ID: id, Batch: 40, Concurrency: 40, LeaseMargin: 3 * time.Second,
			RescueInterval: 200 * time.Millisecond, PollInterval: 100 * time.Millisecond, CleanupInterval: -1, Logger: problems.logger()})
		require.NoError(t, err)
		wg.Add(1)
		go func() { defer wg.Done(); assert.NoError(t, w.Run(ctx)) }()
		return w
	}
	owner := start("owner")
	waitProgress(t, "claim", 20*time.Second, 40, func() int { return countRows(t, s.db, queue.table, "status = 1 AND locked_by LIKE 'owner.%'") })
	resume := pauseFunc()
	close(paused)
	other := start("other")
	time.Sleep(pause)
	resume()
	waitProgress(t, "sent after the pause", 20*time.Second, 40, func() int { return countRows(t, s.db, queue.table, "status = 2") })
	time.Sleep(time.Second) // a late rescue would show now
	cancel()
	wg.Wait()

	for id, n := range tr.sends {
		assert.Equal(t, 1, n, "message %s sent %d times", id, n)
	}
	assert.Len(t, tr.sends, 40)
	so, sr := owner.Stats(), other.Stats()
	t.Logf("owner %+v", so)
	t.Logf("other %+v", sr)
	assert.EqualValues(t, 40, so.Sent, "the owner recorded every outcome")
	assert.Zero(t, so.Stale)
	assert.Zero(t, sr.Rescued)
	assert.Equal(t, 40, countRows(t, s.db, queue.table, "status = 2 AND attempts = 1 AND crashes = 0 AND maybe_delivered = 0"))
	assert.Equal(t, before, countRows(t, s.db, queue.table, "status <> 2"))
	for _, line := range problems.Lines() {
		t.Log(line)
		if strings.Contains(line, "rescued rows") {
			t.Errorf("rescued: %s", line)
		}
		if strings.Contains(line, "recording outcomes failed") {
			failedWrites++
		}
	}
	return failedWrites
}

package faultsuite

import (
	"context"
	"testing"
	"time"
)

// TestDatabaseLockMidDrain holds the queue table locked in the middle of a
// drain while sends are in flight — 60 s of LOCK TABLES ... WRITE on
// MariaDB, 25 s of a BEGIN IMMEDIATE transaction on SQLite — longer than
// the workers' leases. The sends finish during the lock and their outcomes
// cannot be written until it ends; afterwards every mail must be recorded
// exactly once and none sent again.
//
// The lock scenario mostly waits, so it runs in parallel with the
// scenarios that measure no timing (poison, SIGTERM and recycle), after
// the serial ones: go test starts parallel tests once every serial test
// has finished.
func TestDatabaseLockMidDrain(t *testing.T) {
	scenario(t)
	t.Parallel()
	t.Run("mariadb", func(t *testing.T) {
		t.Parallel()
		s := newMariaDB(t)
		lockDrain(t, s, 60*time.Second, func(ctx context.Context) (func(), error) {
			conn, err := s.db.Conn(ctx)
			if err != nil {
				return nil, err
			}
			if _, err := conn.ExecContext(ctx, "LOCK TABLES "+table+" WRITE"); err != nil {
				conn.Close()
				return nil, err
			}
			return func() {
				if _, err := conn.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
					t.Errorf("UNLOCK TABLES: %v", err)
				}
				conn.Close()
			}, nil
		})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		s := newPostgres(t)
		lockDrain(t, s, 60*time.Second, func(ctx context.Context) (func(), error) {
			tx, err := s.db.BeginTx(ctx, nil)
			if err != nil {
				return nil, err
			}
			if _, err := tx.ExecContext(ctx, "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
				_ = tx.Rollback()
				return nil, err
			}
			return func() { _ = tx.Rollback() }, nil
		})
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		s := newSQLite(t)
		lockDrain(t, s, 25*time.Second, func(ctx context.Context) (func(), error) {
			// The store opens SQLite transactions with BEGIN IMMEDIATE:
			// this one holds the write lock until it ends.
			tx, err := s.db.BeginTx(ctx, nil)
			if err != nil {
				return nil, err
			}
			return func() { _ = tx.Rollback() }, nil
		})
	})
}

// lockDrain drains 200 mails through 2 workers whose sends take 1.5 s,
// and after 40 deliveries holds the lock lock takes for hold. The sends are
// slow enough that some are still in flight once the lock is granted (on a
// loaded machine LOCK TABLES can take a while to get): their outcomes are
// what the scenario is about.
func lockDrain(t *testing.T, s store, hold time.Duration, lock func(context.Context) (unlock func(), err error)) {
	t.Helper()
	const mails = 200
	p := startProvider(t)
	p.setStall(1500 * time.Millisecond)
	enqueue(t, s, mails, "lock")
	// A lease runs 5s past the last heartbeat: the lock lasts much longer
	// than any lease, and the heartbeat cannot be written during it either.
	cfg := writeConfig(t, s, p.url(), `batch = 10
concurrency = 5
send_timeout = "5s"
lease_margin = "5s"
poll_interval = "500ms"`)
	w1 := startWorker(t, "worker1", cfg, true)
	w2 := startWorker(t, "worker2", cfg, true)
	dumpLogs(t, w1, w2)

	start := time.Now()
	waitProgress(t, "deliveries before the lock", 60*time.Second,
		func() int64 { return int64(p.count()) }, func() bool { return p.count() >= 40 })
	ctx := context.Background()
	unlock, err := lock(ctx)
	if err != nil {
		t.Fatalf("taking the lock: %v", err)
	}
	lockedAt := p.count()
	time.Sleep(hold)
	deliveredDuringLock := p.count() - lockedAt
	unlock()
	drained(t, s, p, 60*time.Second)
	took := time.Since(start)

	f := tally(t, s, p)
	restarts := len(w1.processes()) + len(w2.processes()) - 2
	report(t, f, "lock", hold, "delivered_during_lock", deliveredDuringLock, "worker_restarts", restarts, "drain", took)
	checkFinal(t, f)
	if f.Sent != mails {
		t.Errorf("%d of %d mails sent", f.Sent, mails)
	}
	if f.Resent != 0 {
		t.Errorf("%d mails sent again after the lock (%d duplicate deliveries)", f.Resent, f.Duplicates)
	}
	if deliveredDuringLock == 0 {
		t.Errorf("no send finished during the lock: the scenario did not test recording outcomes after a pause")
	}
}

package faultsuite

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCleanupBesideWorkers runs "mailspool cleanup" on a table with 12 000
// finished rows past their retention while 4 workers drain 2 000 fresh
// mails (and 500 old pending ones). Only finished rows older than the retention may go (sent after 30
// days, failed after 90); younger finished rows, deferred mail and old
// unsent mail stay; and no statement on the table may wait for a lock for
// more than 1 s.
func TestCleanupBesideWorkers(t *testing.T) {
	scenario(t)
	const fresh = 2000
	s := newMariaDB(t)
	now := time.Now()
	day := 24 * time.Hour
	groups := []struct {
		prefix   string
		n        int
		status   int
		finished time.Duration // next_run: how long ago the row finished (or was due)
		deleted  bool
	}{
		{"old-sent", 10000, sent, 40 * day, true},
		{"old-failed", 2000, failed, 100 * day, true},
		{"young-sent", 2000, sent, 1 * day, false},
		{"young-failed", 1000, failed, 40 * day, false},
		{"deferred", 1000, retry, -time.Hour, false},    // due in an hour, created long ago
		{"old-pending", 500, pending, 100 * day, false}, // due for 100 days: the workers send it now
	}
	for _, g := range groups {
		if _, err := s.db.Exec(`INSERT INTO `+table+` (status, attempts, next_run, sent_at, created_at, message_id, from_addr, to_addr, subject, text_body, html_body, headers)
  SELECT ?, 1, ?, ?, ?, CONCAT(?, '-', seq, '@faults.test'), 'noreply@shop.example', CONCAT('h', seq, '@example.com'), 'history', 'text', '', '[]'
  FROM seq_1_to_`+itoa(g.n),
			g.status, now.Add(-g.finished).UnixMilli(), now.Add(-g.finished).UnixMilli(), now.Add(-200*day).UnixMilli(), g.prefix); err != nil {
			t.Fatalf("inserting %s rows: %v", g.prefix, err)
		}
	}
	p := startProvider(t)
	p.setStall(20 * time.Millisecond)
	enqueue(t, s, fresh, "fresh")
	cfg := writeConfig(t, s, p.url(), `batch = 20
concurrency = 8
poll_interval = "200ms"`)
	var ws []*supervised
	for i := range 4 {
		ws = append(ws, startWorker(t, fmt.Sprintf("worker%d", i+1), cfg, true))
	}
	dumpLogs(t, ws...)

	// Watch lock waits in the scenario's database: the longest-running
	// statement of any transaction that is waiting for a lock.
	var dbName string
	if err := s.db.QueryRow("SELECT DATABASE()").Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	var maxWaitMS, samples atomic.Int64
	stop := make(chan struct{})
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		for {
			var ms float64
			err := s.db.QueryRow(`SELECT COALESCE(MAX(p.TIME_MS), 0) FROM information_schema.INNODB_TRX t
  JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
  WHERE t.trx_state = 'LOCK WAIT' AND p.DB = ?`, dbName).Scan(&ms)
			if err == nil {
				samples.Add(1)
				maxWaitMS.Store(max(maxWaitMS.Load(), int64(ms)))
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()

	// The mails the workers send: the fresh ones and the old pending ones.
	const mine = "message_id NOT LIKE '%@faults.test' OR message_id LIKE 'old-pending-%'"
	start := time.Now()
	waitProgress(t, "deliveries before the cleanup", 60*time.Second,
		func() int64 { return int64(p.count()) }, func() bool { return p.count() >= 300 })
	cleanupStart, deliveredAtCleanupStart := time.Now(), p.count()
	out := mailspool(t, "cleanup", "--config", cfg, "--json")
	cleanupTook := time.Since(cleanupStart)
	deliveredAtCleanupEnd := p.count()
	drainedWhere(t, s, p, mine, 60*time.Second)
	took := time.Since(start)
	close(stop)
	watch.Wait()

	var res struct{ Deleted map[string]int64 }
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &res); err != nil {
		t.Fatalf("cleanup output %q: %v", out, err)
	}
	f := tallyWhere(t, s, p, mine)
	report(t, f, "deleted", res.Deleted["fault"], "cleanup", cleanupTook, "delivered_during_cleanup", deliveredAtCleanupEnd-deliveredAtCleanupStart,
		"max_lock_wait_ms", maxWaitMS.Load(), "lock_samples", samples.Load(), "drain", took)
	checkFinal(t, f)
	if f.Resent != 0 {
		t.Errorf("%d mails sent twice", f.Resent)
	}
	if deliveredAtCleanupEnd-deliveredAtCleanupStart < 100 {
		t.Errorf("only %d deliveries during the cleanup: the workers and the cleanup did not run side by side", deliveredAtCleanupEnd-deliveredAtCleanupStart)
	}
	if samples.Load() == 0 {
		t.Error("the lock-wait watcher never got an answer")
	}
	var wantDeleted int64
	for _, g := range groups {
		left := countWhere(t, s, "message_id LIKE ?", g.prefix+"-%")
		switch {
		case g.deleted && left != 0:
			t.Errorf("%d of %d %s rows left; they are past their retention", left, g.n, g.prefix)
		case !g.deleted && left != g.n:
			t.Errorf("%d of %d %s rows left; cleanup must keep them", left, g.n, g.prefix)
		}
		if g.deleted {
			wantDeleted += int64(g.n)
		}
	}
	if got := res.Deleted["fault"]; got != wantDeleted {
		t.Errorf("cleanup reports %d rows deleted, want %d", got, wantDeleted)
	}
	if ms := maxWaitMS.Load(); ms > 1000 {
		t.Errorf("a statement waited for a lock for %d ms (at most 1 s)", ms)
	}
	if errs := logLines(ws, "level=ERROR", "Lock wait timeout", "Deadlock"); len(errs) > 0 {
		t.Errorf("errors in the worker logs:\n%s", strings.Join(errs, "\n"))
	}
}

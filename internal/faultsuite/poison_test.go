package faultsuite

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestPoisonMessage queues one mail whose send panics (the fake transport's
// panic step, by the recipient's +panic tag) among 200 good ones, with one
// worker restarted like systemd does. Each panic kills the process; the
// crash is counted when the row's lease expires, and after 3 crashes the
// row fails as poison instead of crash-looping the worker. Every other mail
// is sent.
func TestPoisonMessage(t *testing.T) {
	scenario(t)
	t.Parallel() // runs inside the lock scenario's idle minute; see TestDatabaseLockMidDrain
	for _, st := range serverStores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			poisonRun(t, st.open(t))
		})
	}
}

func poisonRun(t *testing.T, s store) {
	const good = 200
	enqueue(t, s, good/2, "good")
	q := newQueue(t, s)
	poison, err := q.Enqueue(context.Background(), s.db, message("poison+panic@example.com"))
	if err != nil {
		t.Fatal(err)
	}
	enqueue(t, s, good/2, "later")
	// A lease runs 1s past the last heartbeat: a crash is noticed at the
	// next rescue (every 5s) after that.
	cfg := writeConfig(t, s, "fake://?recipient=true&latency=20ms", `batch = 10
concurrency = 5
send_timeout = "1s"
lease_margin = "1s"
poll_interval = "200ms"`)
	w := startWorker(t, "worker", cfg, true)
	dumpLogs(t, w)

	start := time.Now()
	waitProgress(t, "poison run", 60*time.Second,
		func() int64 { return finished(t, s) + int64(len(w.processes()))<<32 },
		func() bool { return finished(t, s) == good+1 })
	took := time.Since(start)
	w.stop(30 * time.Second)

	panics := strings.Count(w.log(), "the panic step")
	var status int
	var lastError string
	if err := s.db.QueryRow(s.sql("SELECT status, last_error FROM "+table+" WHERE id = ?"), poison).Scan(&status, &lastError); err != nil {
		t.Fatal(err)
	}
	f := tally(t, s, nil)
	report(t, f, "panics", panics, "worker_runs", len(w.processes()), "poison_failed_after", took)
	if status != failed {
		t.Errorf("poison row status %d, want failed", status)
	}
	if !strings.Contains(lastError, "poison") {
		t.Errorf("poison row last_error %q does not say poison", lastError)
	}
	if panics != 3 {
		t.Errorf("the poison mail crashed the worker %d times, want exactly 3", panics)
	}
	if f.Sent != good {
		var lastError string
		_ = s.db.QueryRow(s.sql("SELECT last_error FROM "+table+" WHERE status = ? AND id <> ? LIMIT 1"), failed, poison).Scan(&lastError)
		t.Errorf("%d of %d good mails sent; a failed good one says %q", f.Sent, good, lastError)
	}
	checkFinal(t, f)
}

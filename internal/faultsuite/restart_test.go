package faultsuite

import (
	"testing"
	"time"
)

// TestMariaDBRestart restarts the database server (a private mariadbd)
// in the middle of a drain of 2 000 mails by 2 workers. The workers must
// reconnect on their own (no process exits), and afterwards nothing is
// lost and nothing is left in sending.
func TestMariaDBRestart(t *testing.T) {
	scenario(t)
	const mails = 2000
	m := startPrivateMariaDB(t)
	m.exec(t, "CREATE DATABASE faults")
	s := migrated(t, "mariadb", m.url("faults"))
	p := startProvider(t)
	p.setStall(5 * time.Millisecond)
	enqueue(t, s, mails, "restart")
	cfg := writeConfig(t, s, p.url(), `batch = 20
concurrency = 8
poll_interval = "200ms"`)
	ws := []*supervised{startWorker(t, "worker1", cfg, true), startWorker(t, "worker2", cfg, true)}
	dumpLogs(t, ws...)

	start := time.Now()
	waitProgress(t, "deliveries before the restart", 60*time.Second,
		func() int64 { return int64(p.count()) }, func() bool { return p.count() >= mails/4 })
	down := time.Now()
	deliveredAtStop := p.count()
	m.stop(t)
	time.Sleep(2 * time.Second) // the server is down for a while, as in a real restart
	m.start(t)
	downFor := time.Since(down)
	drained(t, s, p, 90*time.Second)
	took := time.Since(start)

	f := tally(t, s, p)
	restarts := 0
	for _, w := range ws {
		restarts += len(w.processes()) - 1
	}
	report(t, f, "delivered_before_restart", deliveredAtStop, "db_down", downFor, "worker_restarts", restarts, "drain", took)
	checkFinal(t, f)
	if f.Sent != mails {
		t.Errorf("%d of %d mails sent", f.Sent, mails)
	}
	if restarts != 0 {
		t.Errorf("worker processes exited %d times; they should reconnect", restarts)
	}
}

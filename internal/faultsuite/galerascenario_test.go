package faultsuite

import (
	"fmt"
	"testing"
	"time"
)

// galeraLane is the lane of the Galera scenario's workers: the defaults,
// but for a short poll.
const galeraLane = `concurrency = 16
poll_interval = "200ms"`

// TestGalera drains mail through a private 3-node MariaDB Galera cluster
// on loopback (docs/SCALING.md), with 4 worker processes whose database
// URL lists the three nodes:
//
//   - multi_writer: the workers spread over the three nodes, so their
//     claims and completions meet in certification; the conflicts are
//     counted, and every mail is still sent exactly once;
//   - single_writer_kill: every worker and the enqueue on node 1, which is
//     killed (SIGKILL of its mariadbd) a third of the way through the
//     drain; the workers go on through node 2 without exiting, nothing is
//     lost, and a mail sent twice is one in flight at the kill, flagged
//     maybe_delivered.
func TestGalera(t *testing.T) {
	scenario(t)
	g := startGalera(t)
	mails := galeraMails(t)
	t.Run("multi_writer", func(t *testing.T) { galeraMultiWriter(t, g, mails) })
	t.Run("single_writer_kill", func(t *testing.T) { galeraSingleWriter(t, g, mails) })
}

func galeraMultiWriter(t *testing.T, g *galera, mails int) {
	g.exec(t, "CREATE DATABASE multi")
	s := migrated(t, "galera", g.url("multi", 0))
	p := startProvider(t)
	p.setStall(time.Millisecond)
	enqueue(t, s, mails, "multi")
	before := g.conflicts(t)
	ws := make([]*supervised, 4)
	for i := range ws {
		// Worker i connects to node i%3 first.
		cfg := writeConfig(t, store{url: g.url("multi", i%3)}, p.url(), galeraLane)
		ws[i] = startWorker(t, fmt.Sprintf("worker%d", i+1), cfg, true)
	}
	dumpLogs(t, ws...)
	start := time.Now()
	drained(t, s, p, 120*time.Second)
	took := time.Since(start)
	conflicts := g.conflicts(t) - before

	f := tally(t, s, p)
	retried := len(logLines(ws, "Deadlock", "1213"))
	report(t, f, "drain", took, "drain_per_s", float64(mails)/took.Seconds(),
		"conflicts", conflicts, "conflicts_per_1000", float64(conflicts)*1000/float64(mails),
		"deadlock_errors_logged", retried, "worker_restarts", restarts(ws))
	checkFinal(t, f)
	if f.Sent != mails {
		t.Errorf("%d of %d mails sent", f.Sent, mails)
	}
	if f.Duplicates != 0 {
		t.Errorf("%d duplicate deliveries with no node killed", f.Duplicates)
	}
	if n := restarts(ws); n != 0 {
		t.Errorf("worker processes exited %d times; a conflict should be retried", n)
	}
}

func galeraSingleWriter(t *testing.T, g *galera, mails int) {
	g.exec(t, "CREATE DATABASE single")
	s := migrated(t, "galera", g.url("single", 0))
	p := startProvider(t)
	p.setStall(time.Millisecond)
	enqueue(t, s, mails, "single")
	before := g.conflicts(t)
	cfg := writeConfig(t, s, p.url(), galeraLane)
	ws := make([]*supervised, 4)
	for i := range ws {
		ws[i] = startWorker(t, fmt.Sprintf("worker%d", i+1), cfg, true)
	}
	dumpLogs(t, ws...)

	start := time.Now()
	waitProgress(t, "deliveries before the kill", 60*time.Second,
		func() int64 { return int64(p.count()) }, func() bool { return p.count() >= mails/3 })
	beforeKill := time.Since(start)
	deliveredAtKill := p.count()
	g.kill(t, g.nodes[0])
	killed := time.Now()
	// The rows claimed and not yet recorded: every commit of node 1 was
	// certified by the others before it returned, so node 2 has them.
	inFlight := countWhere(t, s, "status = ?", sending)
	drained(t, s, p, 120*time.Second)
	took := time.Since(start)
	afterKill := time.Since(killed)
	conflicts := g.conflicts(t) - before

	f := tally(t, s, p)
	report(t, f, "delivered_before_kill", deliveredAtKill, "in_flight_at_kill", inFlight,
		"drain_per_s_before_kill", float64(deliveredAtKill)/beforeKill.Seconds(),
		"drain_after_kill", afterKill, "drain", took, "drain_per_s", float64(mails)/took.Seconds(),
		"conflicts", conflicts, "conflicts_per_1000", float64(conflicts)*1000/float64(mails),
		"worker_restarts", restarts(ws), "errors_logged", len(logLines(ws, "level=ERROR")))
	for _, l := range logLines(ws, "level=ERROR") {
		t.Log(l)
	}
	checkFinal(t, f)
	if f.Sent != mails {
		t.Errorf("%d of %d mails sent", f.Sent, mails)
	}
	if f.Duplicates > inFlight {
		t.Errorf("%d duplicate deliveries, more than the %d mails in flight at the kill", f.Duplicates, inFlight)
	}
	if unflagged := resentUnflagged(t, s, p); len(unflagged) > 0 {
		t.Errorf("%d mails delivered twice are not flagged maybe_delivered, e.g. %s", len(unflagged), unflagged[0])
	}
	if n := restarts(ws); n != 0 {
		t.Errorf("worker processes exited %d times; they should reconnect to another node", n)
	}
}

// restarts counts the worker processes that exited and were restarted.
func restarts(ws []*supervised) int {
	n := 0
	for _, w := range ws {
		n += len(w.processes()) - 1
	}
	return n
}

// resentUnflagged returns the Message-IDs of the mails the provider
// received more than once whose row is not flagged maybe_delivered.
func resentUnflagged(t *testing.T, s store, p *provider) []string {
	t.Helper()
	got := p.deliveries()
	rows, err := s.db.Query("SELECT message_id, maybe_delivered FROM " + table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		var maybe int
		if err := rows.Scan(&id, &maybe); err != nil {
			t.Fatal(err)
		}
		if got[normalizeID(id)] > 1 && maybe == 0 {
			out = append(out, id)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

package faultsuite

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// TestSlowProvider makes the provider answer every mail after 8 s while the
// application keeps enqueueing. Enqueue latency must not notice (p99 at
// most 1.5 times the p99 with a fast provider, measured in the same run),
// and no lease may expire while its send is still in flight.
func TestSlowProvider(t *testing.T) {
	scenario(t)
	const samples = 200
	s := newMariaDB(t)
	p := startProvider(t)
	// The defaults: batches of 50, 8 sends at once over at most 4 SMTP
	// connections, 30s per send, the default lease.
	cfg := writeConfig(t, s, p.url(), `poll_interval = "500ms"`)
	w1 := startWorker(t, "worker1", cfg, true)
	w2 := startWorker(t, "worker2", cfg, true)
	dumpLogs(t, w1, w2)
	q := newQueue(t, s)
	ctx := context.Background()

	// measure enqueues samples mails, one transaction each, at about 50 a
	// second (what an application does), and returns the p99 latency.
	n := 0
	measure := func() time.Duration {
		lat := make([]time.Duration, 0, samples)
		for range samples {
			n++
			start := time.Now()
			tx, err := s.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := q.Enqueue(ctx, tx, message("slow-"+itoa(n)+"@example.com")); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			lat = append(lat, time.Since(start))
			time.Sleep(20 * time.Millisecond)
		}
		slices.Sort(lat)
		return lat[len(lat)*99/100]
	}

	fast := measure()

	p.setStall(8 * time.Second)
	// Expired leases are watched from the first slow send to the end.
	var expired, watched atomic.Int64
	stop := make(chan struct{})
	watcher := make(chan struct{})
	go func() {
		defer close(watcher)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			var c int64
			if err := s.db.QueryRow("SELECT COUNT(*) FROM "+table+" WHERE status = ? AND locked_until < ?",
				sending, time.Now().UnixMilli()).Scan(&c); err == nil {
				expired.Store(max(expired.Load(), c))
				watched.Add(1)
			}
		}
	}()
	slow := measure()
	inFlight := func() int { p.mu.Lock(); defer p.mu.Unlock(); return p.inFlight }()
	// Let the slow sends already started finish, then speed up for the rest.
	time.Sleep(9 * time.Second)
	p.setStall(0)
	drained(t, s, p, 60*time.Second)
	close(stop)
	<-watcher

	f := tally(t, s, p)
	ratio := float64(slow) / float64(fast)
	report(t, f, "enqueue_p99_fast", fast, "enqueue_p99_slow", slow, "ratio", ratio,
		"sends_in_flight_at_8s", inFlight, "max_expired_leases_seen", expired.Load(), "lease_checks", watched.Load())
	checkFinal(t, f)
	if inFlight == 0 {
		t.Error("no send was in flight at the slow provider: the scenario tested nothing")
	}
	if ratio > 1.5 {
		t.Errorf("enqueue p99 %s with the slow provider is %.2f times the %s with a fast one (at most 1.5)", slow, ratio, fast)
	}
	if expired.Load() != 0 {
		t.Errorf("%d rows were in sending past their lease while the provider was slow", expired.Load())
	}
	if f.Resent != 0 {
		t.Errorf("%d mails sent twice", f.Resent)
	}
}

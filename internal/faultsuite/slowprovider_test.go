package faultsuite

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailspool/mailspool/queue"
)

// TestSlowProvider makes a provider answer every mail after 8 s while the
// application keeps enqueueing. Enqueue latency must not notice: the
// application enqueues alternately into two databases on the same server,
// one whose workers send to a fast provider and one whose workers send to
// the slow one, so both samples see the same machine at the same moments;
// the p99 with the slow provider must be at most 1.5 times the p99 with the
// fast one's on all but a few samples. And no lease may expire while its
// send is still in flight.
//
// The gate is a count, not the ratio of the two p99s, which the test
// reports: the p99 of 1 000 samples is the 11th-worst, and a machine stall
// (other tests run beside this one) lands on one sample of a pair, not
// both; twenty stalls split 13 to 7 put one side's p99 among the stalls and
// the other's not (with 300 a side, one CI run measured 1.59 times). A
// provider that slowed the enqueue would slow many samples: at most 3 % of
// the slow side's may take more than 1.5 times the fast side's p99.
func TestSlowProvider(t *testing.T) {
	scenario(t)
	const samples = 1000
	type side struct {
		name string
		s    store
		p    *provider
		q    *queue.Queue
		lat  []time.Duration
	}
	var sides [2]*side
	for i, name := range []string{"fast", "slow"} {
		s := newMariaDB(t)
		p := startProvider(t)
		// The defaults: batches of 50, 8 sends at once over at most 4 SMTP
		// connections, 30s per send, leases renewed by the heartbeat.
		cfg := writeConfig(t, s, p.url(), `poll_interval = "500ms"`)
		w1 := startWorker(t, name+"1", cfg, true)
		w2 := startWorker(t, name+"2", cfg, true)
		dumpLogs(t, w1, w2)
		sides[i] = &side{name: name, s: s, p: p, q: newQueue(t, s)}
	}
	fast, slow := sides[0], sides[1]
	slow.p.setStall(8 * time.Second)

	// Expired leases on the slow side are watched from the first slow send
	// to the end of the drain.
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
			if err := slow.s.db.QueryRow("SELECT COUNT(*) FROM "+table+" WHERE status = ? AND locked_until < ?",
				sending, time.Now().UnixMilli()).Scan(&c); err == nil {
				expired.Store(max(expired.Load(), c))
				watched.Add(1)
			}
		}
	}()

	ctx := context.Background()
	inFlight := 0
	for i := range samples {
		for _, sd := range sides {
			start := time.Now()
			tx, err := sd.s.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sd.q.Enqueue(ctx, tx, message(sd.name+"-"+itoa(i)+"@example.com")); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			sd.lat = append(sd.lat, time.Since(start))
		}
		inFlight = max(inFlight, slow.p.stalled())
		time.Sleep(10 * time.Millisecond) // about 70 mails a second in all
	}
	// Let the slow sends already started finish, then speed up the rest.
	time.Sleep(9 * time.Second)
	slow.p.setStall(0)
	for _, sd := range sides {
		drained(t, sd.s, sd.p, 60*time.Second)
	}
	close(stop)
	<-watcher

	p99 := func(lat []time.Duration) time.Duration {
		slices.Sort(lat)
		return lat[len(lat)*99/100]
	}
	fastP99, slowP99 := p99(fast.lat), p99(slow.lat)
	ratio := float64(slowP99) / float64(fastP99)
	bound := fastP99 * 3 / 2
	over := func(lat []time.Duration) int {
		n := 0
		for _, d := range lat {
			if d > bound {
				n++
			}
		}
		return n
	}
	slowOver, fastOver := over(slow.lat), over(fast.lat)
	f := tally(t, slow.s, slow.p)
	report(t, f, "enqueue_p99_fast", fastP99, "enqueue_p99_slow", slowP99, "ratio", ratio,
		"slow_over_1.5x_fast_p99", slowOver, "fast_over_1.5x_fast_p99", fastOver,
		"most_sends_stalled_at_once", inFlight, "max_expired_leases_seen", expired.Load(), "lease_checks", watched.Load())
	checkFinal(t, f)
	checkFinal(t, tally(t, fast.s, fast.p))
	if inFlight == 0 {
		t.Error("no send was in flight at the slow provider: the scenario tested nothing")
	}
	if slowOver > samples*3/100 {
		t.Errorf("%d of %d enqueues with the slow provider took more than %s, 1.5 times the p99 with a fast one (at most 3 %%; the fast side had %d; p99 %s against %s)",
			slowOver, samples, bound, fastOver, slowP99, fastP99)
	}
	if expired.Load() != 0 {
		t.Errorf("%d rows were in sending past their lease while the provider was slow", expired.Load())
	}
	if f.Resent != 0 {
		t.Errorf("%d mails sent twice", f.Resent)
	}
}

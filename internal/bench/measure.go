package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// tracker counts deliveries by Message-ID.
type tracker struct {
	total int            // mails enqueued; fixed
	index map[string]int // mail number by Message-ID; fixed
	// committed holds each mail's enqueue commit time, written by the
	// producers (produce) and read once they are done.
	committed []time.Time

	mu        sync.Mutex
	count     []int32     // deliveries by mail number
	first     []time.Time // first delivery by mail number
	distinct  int
	delivered int
	foreign   int           // deliveries of a Message-ID this run never enqueued
	last      time.Time     // of the last delivery
	lastNew   time.Time     // of the last first delivery of a mail
	done      chan struct{} // closed when every mail was delivered once
}

func newTracker(ids []string) *tracker {
	t := &tracker{total: len(ids), index: make(map[string]int, len(ids)), committed: make([]time.Time, len(ids)),
		count: make([]int32, len(ids)), first: make([]time.Time, len(ids)), done: make(chan struct{}), last: time.Now()}
	for i, id := range ids {
		t.index[id] = i
	}
	return t
}

// deliver records one accepted send of the mail with Message-ID id, now.
func (t *tracker) deliver(id string) { t.deliverAt(id, time.Now()) }

// deliverAt records one accepted send of the mail with Message-ID id,
// which ended at at (a worker process reports its sends in batches, each
// with its own time).
func (t *tracker) deliverAt(id string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.delivered++
	if at.After(t.last) {
		t.last = at
	}
	i, ok := t.index[id]
	if !ok {
		t.foreign++
		return
	}
	t.count[i]++
	if t.count[i] == 1 {
		t.first[i] = at
		if at.After(t.lastNew) {
			t.lastNew = at
		}
		t.distinct++
		if t.distinct == t.total {
			close(t.done)
		}
	}
}

// endToEnd returns, for each mail delivered, the time from its enqueue's
// commit to its first delivery (0 when the delivery was recorded first:
// a worker can send a mail before its producer has read the clock).
// Call it once the producers are done.
func (t *tracker) endToEnd() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ds []time.Duration
	for i, at := range t.first {
		if !at.IsZero() && !t.committed[i].IsZero() {
			ds = append(ds, max(0, at.Sub(t.committed[i])))
		}
	}
	return ds
}

func (t *tracker) counts() (distinct, delivered, foreign int, last time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.distinct, t.delivered, t.foreign, t.last
}

// wait returns when every mail was delivered, when no delivery happened
// for stall since the later of its own start and the last delivery, or
// when ctx ends; it reports progress every second.
func (t *tracker) wait(ctx context.Context, stall time.Duration, progress io.Writer, label string) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	start, prev := time.Now(), 0
	for {
		select {
		case <-t.done:
			return
		case <-ctx.Done():
			return
		case now := <-tick.C:
			distinct, delivered, _, last := t.counts()
			fmt.Fprintf(progress, "%s: drain %d/%d delivered (%d deliveries), %.0f/s, %.0fs\n",
				label, distinct, t.total, delivered, float64(distinct-prev), now.Sub(start).Seconds())
			prev = distinct
			if last.Before(start) {
				last = start // the enqueue before the drain is no stall
			}
			if now.Sub(last) > stall {
				fmt.Fprintf(progress, "%s: no delivery for %v: giving up\n", label, stall)
				return
			}
		}
	}
}

// percentile returns the p-th percentile (0..100) of ds in milliseconds.
func percentile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p / 100)
	return float64(s[i]) / float64(time.Millisecond)
}

// resetPeakRSS restarts this process's peak resident set size (VmHWM),
// where Linux allows it.
func resetPeakRSS() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// peakRSSMB returns this process's peak resident set size in MB (0 where
// /proc is not available).
func peakRSSMB() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

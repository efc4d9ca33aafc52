package composite_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/mail"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/classify"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/composite"
)

// member is a provider of the proof: it refuses recipients tagged +550
// with 550 5.1.1, resets every connection while resetting is on, and
// accepts a +stall mail and then times out before answering (the first
// time; a provider that dedupes by Message-ID after that).
type member struct {
	name      string
	resetting atomic.Bool

	mu        sync.Mutex
	attempts  map[string]int      // by recipient
	delivered map[string]int      // by recipient
	failures  []time.Time         // resets answered
	sends     map[string][]string // by recipient: the workers that sent it
}

func newMember(name string) *member {
	return &member{name: name, attempts: map[string]int{}, delivered: map[string]int{}, sends: map[string][]string{}}
}

func (p *member) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	// A provider takes a few milliseconds, so that the drain lasts
	// beyond the probe interval.
	select {
	case <-time.After(10 * time.Millisecond):
	case <-ctx.Done():
		return transport.Receipt{}, classify.Error(ctx.Err())
	}
	to := m.To.Address
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resetting.Load() {
		// The connection is reset before the recipient is named: the
		// recipient was not tried here.
		p.failures = append(p.failures, time.Now())
		return transport.Receipt{}, classify.Error(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET})
	}
	p.attempts[to]++
	switch {
	case strings.Contains(to, "+550@"):
		return transport.Receipt{}, classify.SMTPReply("550 5.1.1 The email account that you tried to reach does not exist")
	case strings.Contains(to, "+stall@"):
		p.delivered[to]++
		if p.delivered[to] == 1 {
			return transport.Receipt{}, classify.MaybeDelivered(&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded})
		}
		p.delivered[to]-- // the provider knows this Message-ID: not delivered twice
		return transport.Receipt{MessageID: p.name + "-" + m.MessageID}, nil
	}
	p.delivered[to]++
	return transport.Receipt{MessageID: p.name + "-" + m.MessageID}, nil
}

func (p *member) Close() error { return nil }

// probes counts the half-open probes claimed through a Health, and
// records when each claim began and when each "up" was written.
type probes struct {
	composite.Health
	n atomic.Int64

	mu     sync.Mutex
	claims []time.Time // when a claim that won began
	ups    []time.Time // when an up was written
	downs  []time.Time // when a down was written
	reads  []read      // the reads of the lane's down members
}

// read is one Down call: when it began and ended, and whether it said
// member A was down.
type read struct {
	began, ended time.Time
	aDown        bool
}

func (h *probes) Down(ctx context.Context, lane string) (map[string]composite.State, error) {
	began := time.Now()
	down, err := h.Health.Down(ctx, lane)
	_, aDown := down["fake://a"]
	h.mu.Lock()
	h.reads = append(h.reads, read{began, time.Now(), aDown})
	h.mu.Unlock()
	return down, err
}

func (h *probes) MarkDown(ctx context.Context, lane, m, reason string, sent, next time.Time) (bool, error) {
	down, err := h.Health.MarkDown(ctx, lane, m, reason, sent, next)
	if err == nil && m == "fake://a" {
		h.mu.Lock()
		h.downs = append(h.downs, time.Now())
		h.mu.Unlock()
	}
	return down, err
}

func (h *probes) ClaimProbe(ctx context.Context, lane, m string, now, next time.Time) (bool, error) {
	began := time.Now()
	ok, err := h.Health.ClaimProbe(ctx, lane, m, now, next)
	if ok {
		h.n.Add(1)
		h.mu.Lock()
		h.claims = append(h.claims, began)
		h.mu.Unlock()
	}
	return ok, err
}

func (h *probes) MarkUp(ctx context.Context, lane, m string, at time.Time) error {
	err := h.Health.MarkUp(ctx, lane, m, at)
	if err == nil {
		h.mu.Lock()
		h.ups = append(h.ups, time.Now())
		h.mu.Unlock()
	}
	return err
}

// TestProofThroughTheQueue is the proof, through the real queue
// and worker on SQLite: several worker processes (each its own database
// handle, health cache and composite) drain N mails, 1 % to a recipient
// refused with 550 5.1.1, through failover(A, B); A resets every
// connection from 30 % of the mails settled to 50 %. N is 1 000 by
// default and 10 000 with MAILSPOOL_PROOF_MAILS=10000; the outage is
// measured in progress, not in seconds, so a loaded machine only slows
// it down.
func TestProofThroughTheQueue(t *testing.T) {
	n := 1000
	if v := os.Getenv("MAILSPOOL_PROOF_MAILS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err)
	}
	const workers = 3
	ctx := context.Background()
	path := "sqlite:" + filepath.Join(t.TempDir(), "q.db")
	db, err := dburl.Open(path)
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, queue.Migrate(ctx, db))
	require.NoError(t, composite.Migrate(ctx, db))
	lane := queue.Lane{Name: "tx", Retry: queue.RetryPolicy{Schedule: []time.Duration{100 * time.Millisecond}, ConnectionSchedule: []time.Duration{100 * time.Millisecond}}}
	q, err := queue.New(ctx, db, lane, nil)
	require.NoError(t, err)

	// The +stall mail first, so that it meets A up.
	var bad []string
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	for i := range n {
		to := fmt.Sprintf("u%d@example.com", i)
		switch {
		case i == 0:
			to = "u0+stall@example.com"
		case i%100 == 50:
			to = fmt.Sprintf("u%d+550@example.com", i)
			bad = append(bad, to)
		}
		_, err := q.Enqueue(ctx, tx, &transport.Message{From: mail.Address{Address: "noreply@shop.example"}, To: mail.Address{Address: to}, Subject: "s", Text: "t"})
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit())

	a, b := newMember("a"), newMember("b")
	sp, err := composite.Parse("failover(fake://a, fake://b; probe=300ms)")
	require.NoError(t, err)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var healths []*probes
	var refresh time.Duration // of the workers' shared health
	var trs []*composite.Transport
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for w := range workers {
		wdb, err := dburl.Open(path)
		require.NoError(t, err)
		defer wdb.Close()
		sh, err := composite.NewSQL(wdb)
		require.NoError(t, err)
		refresh = sh.Refresh
		h := &probes{Health: sh}
		healths = append(healths, h)
		tr, err := composite.New(sp, []transport.Transport{a, b}, composite.Options{Lane: "tx", Health: h, Logger: quiet})
		require.NoError(t, err)
		trs = append(trs, tr)
		wq, err := queue.New(ctx, wdb, lane, nil)
		require.NoError(t, err)
		wk, err := queue.NewWorker(wq, tr, &queue.WorkerOptions{ID: "w" + strconv.Itoa(w), Batch: 20, Concurrency: 4, PollInterval: 20 * time.Millisecond, Logger: quiet})
		require.NoError(t, err)
		wg.Go(func() { assert.NoError(t, wk.Run(runCtx)) })
	}

	// Progress: the outage starts at 30 % settled and ends at 50 %. The
	// probe interval (300 ms) is longer than a probe's send takes even
	// under -race on a loaded machine (a probe still in flight when the
	// next one is due would make two), and shorter than what is left of
	// the drain after the outage, so that A is seen back before the end.
	settled := func() int64 {
		s, err := q.Stats(ctx)
		require.NoError(t, err)
		return s.SentLastHour + s.FailedLastHour
	}
	var outageStart, outageEnd time.Time
	var probesAtEnd int64
	var aSentAtEnd []int64
	last, lastMove := int64(-1), time.Now()
	for {
		done := settled()
		if done != last {
			last, lastMove = done, time.Now()
		}
		require.Less(t, time.Since(lastMove), time.Minute, "no progress for a minute at %d of %d settled", done, n)
		if outageStart.IsZero() && done >= int64(n)*3/10 {
			outageStart = time.Now()
			a.resetting.Store(true)
		}
		if !outageStart.IsZero() && outageEnd.IsZero() && done >= int64(n)*5/10 {
			outageEnd = time.Now()
			// The outage ends before the probes are counted: a probe
			// counted here either already failed or sends to a healthy A,
			// so at most one more probe can follow.
			a.resetting.Store(false)
			for _, h := range healths {
				probesAtEnd += h.n.Load()
			}
			for _, tr := range trs {
				aSentAtEnd = append(aSentAtEnd, tr.Members()[0].Sent)
			}
		}
		if done == int64(n) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	wg.Wait()

	// Bad recipients: tried once in all, failed as recipient verdicts,
	// never tried on both members, and A went down only in the outage.
	for _, to := range bad {
		assert.Equal(t, 1, a.attempts[to]+b.attempts[to], "attempts for %s", to)
		assert.False(t, a.attempts[to] > 0 && b.attempts[to] > 0, "%s tried on both members", to)
	}
	var badOnA int
	for _, to := range bad {
		badOnA += a.attempts[to]
	}
	require.NotEmpty(t, a.failures, "the outage reached A")
	t0 := a.failures[0]
	assert.True(t, !t0.Before(outageStart), "A failed before its outage")

	// Every worker skips A within its health refresh of the first "down"
	// written: each read of the shared health that began a refresh after
	// it, and ended before the outage did, says A is down (so every send
	// but a claimed probe goes to B). How soon after A's first reset that
	// is depends on how long the write of the "down" takes, which a loaded
	// machine stretches; it is measured and logged (the issue asks for
	// 1 s): on a quiet machine, a few milliseconds plus the refresh.
	var firstDown time.Time
	var stale int
	for _, h := range healths {
		for _, d := range h.downs {
			if firstDown.IsZero() || d.Before(firstDown) {
				firstDown = d
			}
		}
	}
	require.False(t, firstDown.IsZero(), "A's failures were never written down")
	var allSkip time.Time // when the last worker's last read that missed A ended
	for _, h := range healths {
		for _, r := range h.reads {
			if r.ended.Before(outageEnd) && r.began.After(firstDown.Add(refresh)) && !r.aDown {
				stale++
			}
			if r.ended.After(t0) && r.ended.Before(outageEnd) && !r.aDown && r.ended.After(allSkip) {
				allSkip = r.ended
			}
		}
	}
	assert.Zero(t, stale, "reads of the shared health that began %v after A was written down still saw it up", refresh)
	var late int
	for _, ft := range a.failures {
		if ft.After(t0.Add(time.Second)) {
			late++
		}
	}
	t.Logf("outage: %d resets on A, %d within the first second, %d probes; the first down written %v after the first reset, every worker skipping A %v after it; %d of %d bad recipients went to A",
		len(a.failures), len(a.failures)-late, probesAtEnd, firstDown.Sub(t0).Round(time.Millisecond), allSkip.Sub(t0).Round(time.Millisecond), badOnA, len(bad))

	// Every worker sent through B during the outage, and after it one
	// probe brought A back: mail goes through A again. (Not necessarily
	// from every worker: a worker learns that A is back at its next
	// refresh of the shared health, and the drain may end before that.)
	var aAfter int64
	for i, tr := range trs {
		st := tr.Members()
		assert.Positive(t, st[1].Sent, "worker %d never moved to B", i)
		aAfter += st[0].Sent - aSentAtEnd[i]
	}
	assert.Positive(t, aAfter, "nothing went through A after the outage")
	// One probe brings A back: once an "up" is written after the outage,
	// no probe of A begins (A is down nowhere, so none can be claimed).
	// Two probes may overlap before that: a probe is due again one probe
	// interval after the last, and on a loaded machine a successful
	// probe's "up" can be written later than that. A probe that failed
	// just before the outage ended and reported after the up does not
	// take A down again (TestLateDownLosesToNewerUp).
	var firstUp time.Time
	var claimsAfterEnd []time.Time
	for _, h := range healths {
		for _, u := range h.ups {
			if u.After(outageEnd) && (firstUp.IsZero() || u.Before(firstUp)) {
				firstUp = u
			}
		}
		for _, c := range h.claims {
			if c.After(outageEnd) {
				claimsAfterEnd = append(claimsAfterEnd, c)
			}
		}
	}
	require.False(t, firstUp.IsZero(), "no probe brought A back after the outage")
	for _, c := range claimsAfterEnd {
		assert.False(t, c.After(firstUp), "a probe of A began %v after A was recorded up again", c.Sub(firstUp))
	}
	t.Logf("after the outage: %d probes before A was recorded up", len(claimsAfterEnd))

	// The maybe-delivered mail never went through B: 0 duplicates.
	assert.Zero(t, b.attempts["u0+stall@example.com"], "a maybe-delivered mail was re-sent through B")
	assert.Equal(t, 1, a.delivered["u0+stall@example.com"])
	for to, k := range b.delivered {
		assert.Zero(t, a.delivered[to], "%s delivered by both members", to)
		assert.Equal(t, 1, k, "%s delivered %d times by B", to, k)
	}
	for to, k := range a.delivered {
		assert.Equal(t, 1, k, "%s delivered %d times by A", to, k)
	}

	// Every row's outcome names its member.
	checkRows(t, ctx, db, q, n, len(bad))
}

func checkRows(t *testing.T, ctx context.Context, _ *sql.DB, q *queue.Queue, n, bad int) {
	t.Helper()
	var rows []queue.Row
	before := int64(0)
	for {
		page, err := q.List(ctx, queue.ListOptions{Limit: queue.MaxListLimit, Before: before})
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		rows = append(rows, page...)
		before = page[len(page)-1].ID
	}
	require.Len(t, rows, n)
	count := map[string]int{}
	for _, r := range rows {
		count[r.Status+" "+r.Member]++
		if r.Status == "failed" {
			assert.Equal(t, "recipient", r.LastScope, "row %d", r.ID)
			assert.Contains(t, r.LastError, "via fake://")
		}
		assert.NotEmpty(t, r.Member, "row %d names no member", r.ID)
	}
	t.Logf("rows by status and member: %v", count)
	assert.Equal(t, bad, count["failed fake://a"]+count["failed fake://b"])
}

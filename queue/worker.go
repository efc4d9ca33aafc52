package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mailspool/mailspool/transport"
)

// WorkerOptions configure a Worker. Zero fields take the defaults shown.
type WorkerOptions struct {
	// ID names the worker in locked_by and logs (default host-pid-random).
	// At most 20 bytes.
	ID string
	// Batch is the most rows one claim takes (default 50).
	Batch int
	// Concurrency is the most sends in flight at once (default 8).
	Concurrency int
	// SendTimeout bounds one Send (default 30s).
	SendTimeout time.Duration
	// LeaseMargin is added to the lease on top of the time the batch's
	// sends may take (default 30s).
	LeaseMargin time.Duration
	// PollInterval is the wait after a claim that did not fill a batch
	// (default 2s). After a full batch the worker claims again at once.
	PollInterval time.Duration
	// MaxMessages makes Run return after this many rows have been
	// processed, so that the process exits and systemd starts it fresh
	// (default 0: never).
	MaxMessages int
	// ShutdownTimeout is how long sends in flight may go on after Run's
	// context is cancelled (default 10s).
	ShutdownTimeout time.Duration
	// CleanupInterval runs Cleanup with Retention this often (default 10m;
	// negative: never). It runs on a timer, whether the queue is busy or idle.
	CleanupInterval time.Duration
	Retention       Retention
	// Logger receives the worker's log lines (default slog.Default()).
	Logger *slog.Logger
	// Observer, if not nil, is told what the worker does (metrics, health
	// checks, alerts); see Observer.
	Observer *Observer
}

// WorkerStats counts what a worker has done since it started.
type WorkerStats struct {
	Claimed  int64 // rows claimed
	Sent     int64
	Retried  int64 // rows put back to retry (temporary or connection failure)
	Failed   int64 // rows failed for good (permanent, out of attempts, expired)
	Released int64 // rows given back unsent (shutdown, breaker)
	Stale    int64 // outcomes rejected because the lease had been taken over
}

// Worker claims rows of one lane and sends them through one transport.
type Worker struct {
	q    *Queue
	tr   transport.Transport
	opts WorkerOptions
	log  *slog.Logger
	brk  breaker
	seq  atomic.Uint64
	// slots holds one token per send in flight, across batches.
	slots chan struct{}

	stats struct {
		sync.Mutex
		WorkerStats
	}
}

// NewWorker returns a worker for q's lane sending through tr.
func NewWorker(q *Queue, tr transport.Transport, opts *WorkerOptions) (*Worker, error) {
	if q == nil || tr == nil {
		return nil, errors.New("queue: NewWorker needs a queue and a transport")
	}
	var o WorkerOptions
	if opts != nil {
		o = *opts
	}
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	w := &Worker{q: q, tr: tr, opts: o, log: o.Logger.With("lane", q.lane.Name, "worker", o.ID), slots: make(chan struct{}, o.Concurrency)}
	w.brk.policy = q.lane.Retry
	return w, nil
}

func (o *WorkerOptions) setDefaults() error {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if o.ID == "" {
		o.ID = defaultWorkerID()
	}
	if len(o.ID) > 20 {
		return fmt.Errorf("queue: worker id %q is longer than 20 bytes", o.ID)
	}
	if o.Batch == 0 {
		o.Batch = 50
	}
	if o.Concurrency == 0 {
		o.Concurrency = 8
	}
	def(&o.SendTimeout, 30*time.Second)
	def(&o.LeaseMargin, 30*time.Second)
	def(&o.PollInterval, 2*time.Second)
	def(&o.ShutdownTimeout, 10*time.Second)
	def(&o.CleanupInterval, 10*time.Minute)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch {
	case o.Batch < 1 || o.Batch > maxBatchRows:
		return fmt.Errorf("queue: worker batch %d out of range 1..%d", o.Batch, maxBatchRows)
	case o.Concurrency < 1:
		return fmt.Errorf("queue: worker concurrency %d below 1", o.Concurrency)
	case o.SendTimeout < 0 || o.LeaseMargin < 0 || o.PollInterval < 0 || o.ShutdownTimeout < 0:
		return errors.New("queue: negative worker timeout")
	case o.MaxMessages < 0:
		return fmt.Errorf("queue: negative max messages %d", o.MaxMessages)
	}
	return nil
}

func defaultWorkerID() string {
	host, _ := os.Hostname()
	if len(host) > 8 {
		host = host[:8]
	}
	var b [2]byte
	_, _ = rand.Read(b[:])
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// ID returns the worker's id.
func (w *Worker) ID() string { return w.opts.ID }

// Stats returns what the worker has done so far.
func (w *Worker) Stats() WorkerStats {
	w.stats.Lock()
	defer w.stats.Unlock()
	return w.stats.WorkerStats
}

// lease is how long a claim of n rows holds them: every round of sends may
// take SendTimeout, plus one round for the previous batch's sends still
// holding slots, plus the margin.
func (w *Worker) lease(n int) time.Duration {
	rounds := (n+w.opts.Concurrency-1)/w.opts.Concurrency + 1
	return time.Duration(rounds)*w.opts.SendTimeout + w.opts.LeaseMargin
}

// Run claims and sends until ctx is cancelled or MaxMessages rows have
// been processed. On cancellation it stops claiming, lets sends in flight
// finish for up to ShutdownTimeout, records their outcomes and gives the
// rows it had not started back, so no row is left in sending. Database
// errors are logged and retried after PollInterval: Run never fails, it
// only returns.
//
// Batches overlap: the next claim happens as soon as every row of the
// previous batch has started (a slow send holds its own slot, not the
// whole worker), with at most two batches in flight.
func (w *Worker) Run(ctx context.Context) {
	clock := w.q.clock
	if w.opts.CleanupInterval > 0 {
		cleanupCtx, stop := context.WithCancel(ctx)
		defer stop()
		go w.cleanupLoop(cleanupCtx)
	}
	var inflight sync.WaitGroup
	defer inflight.Wait()
	batches := make(chan struct{}, 2)
	var processed int
	for ctx.Err() == nil {
		if w.opts.MaxMessages > 0 && processed >= w.opts.MaxMessages {
			w.log.Info("recycling after max messages", "processed", processed)
			return
		}
		limit := w.opts.Batch
		if w.opts.MaxMessages > 0 {
			limit = min(limit, w.opts.MaxMessages-processed)
		}
		pause, limit := w.brk.state(clock.Now(), limit)
		if pause > 0 {
			w.log.Warn("lane paused after connection failures", "for", pause)
			call(w.observer().BreakerFunc, BreakerEvent{Lane: w.q.lane.Name, Open: true, Until: clock.Now().Add(pause)})
			if !wait(ctx, clock, pause) {
				break
			}
			continue
		}
		select {
		case batches <- struct{}{}:
		case <-ctx.Done():
			return
		}
		n, done, err := w.dispatch(ctx, limit)
		processed += n
		call(w.observer().ClaimFunc, ClaimEvent{Lane: w.q.lane.Name, Rows: n, Err: err})
		if done != nil {
			inflight.Add(1)
			go func() {
				defer inflight.Done()
				if err := <-done; err != nil {
					w.log.Error("recording a batch failed", "err", err)
				}
				<-batches
			}()
		} else {
			<-batches
		}
		if err != nil && ctx.Err() == nil { // a claim cut short by shutdown is no failure
			w.log.Error("claim failed", "err", err)
		}
		if err != nil || n < limit {
			if !wait(ctx, clock, w.opts.PollInterval) {
				break
			}
		}
	}
}

// wait waits d on clock; false when ctx ended first.
func wait(ctx context.Context, clock Clock, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-clock.After(d):
		return true
	}
}

// cycle claims up to limit rows, sends them, records the outcomes, and
// returns how many rows it claimed: one batch, start to finish.
func (w *Worker) cycle(ctx context.Context, limit int) (int, error) {
	n, done, err := w.dispatch(ctx, limit)
	if done != nil {
		err = errors.Join(err, <-done)
	}
	return n, err
}

// dispatch claims up to limit rows and starts their sends, taking a slot of
// the worker's concurrency for each; it returns once every row has started
// (or been given back), with the number of rows claimed and a channel that
// yields the result of recording the batch's outcomes once its sends are
// done (nil when nothing was claimed).
func (w *Worker) dispatch(ctx context.Context, limit int) (int, <-chan error, error) {
	token := w.opts.ID + "." + strconv.FormatUint(w.seq.Add(1), 36)
	jobs, err := w.q.claim(ctx, token, limit, w.lease(limit))
	if err != nil || len(jobs) == 0 {
		return 0, nil, err
	}
	w.count(func(s *WorkerStats) { s.Claimed += int64(len(jobs)) })

	// Sends may outlive ctx by ShutdownTimeout; the bookkeeping after them
	// must not be cancelled at all.
	sendCtx, stopSends := context.WithCancel(context.WithoutCancel(ctx))
	stopAfter := context.AfterFunc(ctx, func() { time.AfterFunc(w.opts.ShutdownTimeout, stopSends) })

	var (
		decided []rowUpdate // rows settled without a send
		unsent  []int64     // rows given back unsent
		resume  = w.q.now()
		results = make(chan rowUpdate, len(jobs))
		sending int
	)
	for _, j := range jobs {
		now := w.q.clock.Now()
		switch {
		case j.notAfter != 0 && now.UnixMilli() > j.notAfter:
			decided = append(decided, expired(j, now))
			w.observeOutcome(j, decided[len(decided)-1], kindExpired, nil, false, 0)
			continue
		case j.attempts > j.maxAttempts:
			decided = append(decided, abandoned(j, now))
			w.observeOutcome(j, decided[len(decided)-1], "abandoned", nil, false, 0)
			continue
		}
		acquired := false
		select {
		case w.slots <- struct{}{}:
			acquired = true
		case <-ctx.Done():
		}
		if open, until := w.brk.open(w.q.clock.Now()); open || !acquired || ctx.Err() != nil {
			if acquired {
				<-w.slots
			}
			unsent = append(unsent, j.id)
			if open {
				resume = max(resume, until.UnixMilli())
			}
			continue
		}
		sending++
		go func() {
			defer func() { <-w.slots }()
			results <- w.send(sendCtx, j)
		}()
	}
	done := make(chan error, 1)
	go func() {
		defer stopSends()
		defer stopAfter()
		done <- w.collect(ctx, token, decided, results, sending, unsent, resume)
	}()
	return len(jobs), done, nil
}

// flushDelay bounds how long a finished send's outcome waits to be written
// together with others of its batch.
const flushDelay = 200 * time.Millisecond

// collect records a batch's outcomes as its sends finish: the outcomes that
// arrive within flushDelay of each other are written in one statement, so a
// fast batch costs one statement and a slow send does not hold back the
// rows sent before it. Then it gives back the rows that were not sent.
func (w *Worker) collect(ctx context.Context, token string, pending []rowUpdate, results <-chan rowUpdate, sending int, unsent []int64, resume int64) error {
	var errs []error
	flush := func() {
		if len(pending) == 0 {
			return
		}
		if err := w.record(ctx, token, pending); err != nil {
			errs = append(errs, err)
		}
		pending = nil
	}
	timer := time.NewTimer(flushDelay)
	defer timer.Stop()
	for sending > 0 {
		select {
		case u := <-results:
			pending = append(pending, u)
			sending--
		case <-timer.C:
			flush()
			timer.Reset(flushDelay)
		}
	}
	flush()
	if len(unsent) > 0 {
		book, cancel := context.WithTimeout(context.WithoutCancel(ctx), statementTimeout+5*time.Second)
		defer cancel()
		n, err := w.q.release(book, token, unsent, resume)
		if err != nil {
			errs = append(errs, err)
		}
		w.count(func(s *WorkerStats) { s.Released += int64(n) })
	}
	return errors.Join(errs...)
}

// record writes outcomes of rows claimed under token (fenced) and counts
// them; outcomes rejected because the lease was taken over are counted as
// stale and logged.
func (w *Worker) record(ctx context.Context, token string, updates []rowUpdate) error {
	book, cancel := context.WithTimeout(context.WithoutCancel(ctx), statementTimeout+5*time.Second)
	defer cancel()
	applied, err := w.q.complete(book, token, updates)
	if err != nil {
		return err
	}
	if stale := len(updates) - applied; stale > 0 {
		w.log.Warn("outcomes rejected: the lease was taken over by another worker", "rows", stale, "token", token)
		w.count(func(s *WorkerStats) { s.Stale += int64(stale) })
		call(w.observer().FencedFunc, FencedEvent{Lane: w.q.lane.Name, Rows: stale})
	}
	w.countOutcomes(updates)
	return nil
}

// send makes one delivery attempt and decides the row's next state.
func (w *Worker) send(ctx context.Context, j *job) rowUpdate {
	ctx, cancel := context.WithTimeout(ctx, w.opts.SendTimeout)
	defer cancel()
	start := time.Now()
	receipt, err := w.tr.Send(ctx, &j.msg)
	took := time.Since(start)
	now := w.q.clock.Now()
	kind := transport.KindOf(err)
	streak, recovered := w.brk.record(kind, now)
	if recovered {
		call(w.observer().BreakerFunc, BreakerEvent{Lane: w.q.lane.Name})
		w.resumeAfterOutage()
	}
	u := w.q.lane.Retry.outcome(j, receipt, err, now, streak)
	w.observeOutcome(j, u, kind.String(), err, true, took)
	return u
}

func (w *Worker) count(f func(*WorkerStats)) {
	w.stats.Lock()
	defer w.stats.Unlock()
	f(&w.stats.WorkerStats)
}

func (w *Worker) countOutcomes(ups []rowUpdate) {
	w.count(func(s *WorkerStats) {
		for _, u := range ups {
			switch u.status {
			case StatusSent:
				s.Sent++
			case StatusRetry:
				s.Retried++
			case StatusFailed:
				s.Failed++
			}
		}
	})
}

func (w *Worker) cleanupLoop(ctx context.Context) {
	for wait(ctx, w.q.clock, w.opts.CleanupInterval) {
		n, err := w.q.Cleanup(ctx, w.opts.Retention, nil)
		if ctx.Err() == nil {
			call(w.observer().CleanupFunc, CleanupEvent{Lane: w.q.lane.Name, Deleted: n, Err: err})
		}
		if err != nil && ctx.Err() == nil {
			w.log.Error("cleanup failed", "err", err)
			continue
		}
		if n > 0 {
			w.log.Info("cleanup deleted old rows", "rows", n)
		}
	}
}

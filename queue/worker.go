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
	// Batch is the most rows one claim takes (default 200). A claim takes
	// fewer while sends are slow: about as many as Concurrency sends can
	// start within a second at the send time measured so far (never fewer
	// than Concurrency), so that rows wait in a worker that cannot start
	// them soon no longer than that. Only a fast transport (a relay on the
	// same network) fills a batch of 200.
	Batch int
	// Concurrency is the most sends in flight at once (default 8).
	Concurrency int
	// SendTimeout bounds one Send (default 30s).
	SendTimeout time.Duration
	// LeaseMargin is how long a claimed row stays leased past the worker's
	// last heartbeat (default 20s). While sends or unwritten outcomes are
	// pending the worker renews its leases every third of it, so it bounds
	// neither sends nor database pauses: it is how soon a killed worker's
	// rows can be rescued by another worker (within 2 × LeaseMargin +
	// RescueInterval: a lease must stay expired for a margin before it is
	// rescued). After the database was slow or failing, the rescuer
	// waits LeaseMargin before it rescues anything, so that live owners can
	// renew first.
	LeaseMargin time.Duration
	// RescueInterval is how often the worker returns rows whose lease
	// expired (their worker died) to pending or retry (default 5s).
	RescueInterval time.Duration
	// PollInterval is the wait after a claim that found nothing (default
	// 2s, ±25 %); after one that took rows but not a batch the wait is
	// shortened by the share of the batch it filled, down to an eighth to
	// a quarter of it, and after a full batch the worker claims again at
	// once. Wake, the queue's own enqueues in this process and,
	// on PostgreSQL, notifications of any process's enqueues end the wait
	// early. A worker whose claims keep finding that other workers of the
	// lane took the mail first stands back: it polls up to 4 times less
	// often and answers a wake only if, wakeDelay later, the mail is
	// still waiting (wake.go).
	PollInterval time.Duration
	// MaxMessages makes Run return after this many rows have been
	// processed, so that the process exits and systemd starts it fresh
	// (default 0: never).
	MaxMessages int
	// ShutdownTimeout is how long sends in flight may go on after Run's
	// context is cancelled (default 10s); writing their outcomes may take
	// as long again.
	ShutdownTimeout time.Duration
	// FailAfter is how long the database may fail every claim, heartbeat
	// and outcome write before Run gives up and returns an error (default
	// 5m). Until then claims back off (up to 30s apart) and outcomes are
	// kept in memory and retried, so a database pause shorter than
	// FailAfter loses no outcome and re-sends nothing.
	FailAfter time.Duration
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
	Rescued  int64 // rows of dead workers returned by this worker's rescuer
	// DBErrors counts failed claims, heartbeats, outcome writes and
	// rescues; Deadlocks those of them that were deadlocks or lock wait
	// timeouts (MySQL errors 1213 and 1205).
	DBErrors  int64
	Deadlocks int64
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
	// sends feeds the worker's senders (startSenders), a send per slot
	// taken.
	sends  chan sendTask
	leases leases
	// claims, writes and renewals track how long claims, outcome writes
	// and lease renewals have been failing without a break.
	claims, writes, renewals health
	// troubleAt is when a statement of this worker last failed (unix ns,
	// real time): the rescuer waits LeaseMargin after it.
	troubleAt atomic.Int64
	// resume asks Run's resume loop to make mail deferred by an outage due.
	resume chan struct{}
	// abandon is closed when Run stops waiting for outcomes to be written.
	abandon chan struct{}
	// paused is the operator's pause as the claim loop last read it.
	paused pauseWatch
	// cursor is where the claim loop's last picks ended.
	cursor cursor
	// running counts the claim loop's batches not yet recorded (set by
	// claimLoop; nil when a test dispatches batches itself).
	running *sync.WaitGroup
	// wake wakes the claim loop from its wait (Wake).
	wake chan struct{}
	// unlisten is set while the worker stands back too far to listen for
	// notifications (PostgreSQL), and listenChange tells its listenLoop
	// that it changed (setListening).
	unlisten     atomic.Bool
	listenChange chan struct{}
	// announced is the highest row id a notification announced
	// (PostgreSQL), 0 before the first.
	announced atomic.Int64
	// wokenFor is what announced was when the claim loop was last woken
	// standing back (the claim loop's own).
	wokenFor int64
	// back is how far the worker stands back from the lane's mail, and
	// claimedDue when the longest-waiting row of its last claim became
	// due (unix ms); the claim loop's own (wake.go).
	back, served int
	claimedDue   int64
	// spread is how far the worker spreads its poll waits out because
	// other workers claim the lane often (shareLane): a factor from 1 to
	// 2^maxStandBack, 0 before the first claim; the claim loop's own.
	spread float64
	// sendTime is the moving average of a send's duration (ns; 0 before
	// the first send): claimLimit sizes claims by it.
	sendTime atomic.Int64

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
	w := &Worker{q: q, tr: tr, opts: o, log: o.Logger.With("lane", q.lane.Name, "worker", o.ID),
		slots: make(chan struct{}, o.Concurrency), resume: make(chan struct{}, 1), abandon: make(chan struct{}), wake: make(chan struct{}, 1),
		listenChange: make(chan struct{}, 1)}
	w.brk.policy = q.lane.Retry
	w.cursor.suspects = o.Concurrency
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
		o.Batch = 200
	}
	if o.Concurrency == 0 {
		o.Concurrency = 8
	}
	def(&o.SendTimeout, 30*time.Second)
	def(&o.LeaseMargin, 20*time.Second)
	def(&o.RescueInterval, 5*time.Second)
	def(&o.FailAfter, 5*time.Minute)
	def(&o.PollInterval, 2*time.Second)
	def(&o.ShutdownTimeout, 10*time.Second)
	def(&o.CleanupInterval, 10*time.Minute)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch {
	case o.Batch < 1 || o.Batch > maxBatchRows:
		return fmt.Errorf("queue: worker batch %d out of range 1..%d", o.Batch, maxBatchRows)
	case o.Concurrency < 1 || o.Concurrency > MaxConcurrency:
		return fmt.Errorf("queue: worker concurrency %d out of range 1..%d", o.Concurrency, MaxConcurrency)
	case o.SendTimeout < 0 || o.PollInterval < 0 || o.ShutdownTimeout < 0 || o.RescueInterval < 0 || o.FailAfter < 0:
		return errors.New("queue: negative worker timeout")
	case o.LeaseMargin < 3*time.Millisecond:
		return fmt.Errorf("queue: lease margin %v is too short", o.LeaseMargin)
	case o.MaxMessages < 0:
		return fmt.Errorf("queue: negative max messages %d", o.MaxMessages)
	}
	return checkDurations("worker",
		durationBound{"send timeout", o.SendTimeout, MaxSendTimeout},
		durationBound{"lease margin", o.LeaseMargin, MaxLeaseMargin},
		durationBound{"poll interval", o.PollInterval, MaxPollInterval},
		durationBound{"rescue interval", o.RescueInterval, MaxRescueInterval},
		durationBound{"shutdown timeout", o.ShutdownTimeout, MaxShutdownTimeout},
		durationBound{"fail after", o.FailAfter, MaxFailAfter},
		durationBound{"cleanup interval", max(o.CleanupInterval, 0), MaxCleanupInterval}, // negative: never
		durationBound{"retention of sent mail", o.Retention.Sent, MaxRetention},
		durationBound{"retention of failed mail", o.Retention.Failed, MaxRetention},
	)
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

// Run claims and sends until ctx is cancelled, MaxMessages rows have been
// processed, or the database has failed for FailAfter. On the way out it
// stops claiming, lets sends in flight finish for up to ShutdownTimeout,
// records their outcomes and gives back the rows it had not started, so
// no row is left in sending. It returns nil after a cancellation or a
// recycle, and an error when the database kept failing, when the SQLite
// file was replaced or deleted under it, or when outcomes could not be
// written before it gave up (those rows are rescued later, marked maybe
// delivered). Run is called once per Worker.
//
// Batches overlap: the next claim happens as soon as every row of the
// previous batch has started (a slow send holds its own slot, not the
// whole worker), with at most two batches in flight. Run owns its
// background work: the heartbeat, the rescuer, the resume after an outage
// and cleanup, and returns only once they have stopped.
func (w *Worker) Run(ctx context.Context) error {
	stillOurs, err := w.q.fileCheck()
	if err != nil {
		return err
	}
	// The heartbeat must outlive ctx until every outcome is written; the
	// other loops stop with the claims.
	bgCtx, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var bg sync.WaitGroup
	spawn := func(ctx context.Context, loop func(context.Context)) {
		bg.Add(1)
		go func() { defer bg.Done(); loop(ctx) }()
	}
	spawn(bgCtx, w.heartbeatLoop)
	spawn(runCtx, w.rescueLoop)
	defer w.q.wakers.add(w)()
	if w.q.d.postgres {
		spawn(runCtx, w.listenLoop)
	}
	spawn(runCtx, w.resumeLoop)
	if w.opts.CleanupInterval > 0 {
		spawn(runCtx, w.cleanupLoop)
	}

	var batches sync.WaitGroup
	stopSenders := w.startSenders()
	err = w.claimLoop(runCtx, stillOurs, &batches)
	stopRun()
	err = errors.Join(err, w.finish(&batches))
	stopSenders()
	stopBG()
	bg.Wait()
	return err
}

// sendTask is a mail given to a sender, with its batch's send context and
// the channel its outcome goes to.
type sendTask struct {
	ctx     context.Context
	j       *job
	results chan<- rowUpdate
}

// startSenders starts Concurrency goroutines that send the mail dispatch
// gives them, one at a time, each freeing its slot when its outcome is
// handed over. They live as long as Run: a goroutine per mail cost a new
// stack, grown again by each send, and more scheduling. stop lets them end
// once the sends given to them are done; it does not wait for them (a
// transport that ignores its context may hold one forever, as it would
// hold a goroutine per mail).
func (w *Worker) startSenders() (stop func()) {
	sends := make(chan sendTask, w.opts.Concurrency) // never full: a task per slot
	for range w.opts.Concurrency {
		go func() {
			for t := range sends {
				t.results <- w.send(t.ctx, t.j)
				<-w.slots
			}
		}()
	}
	w.sends = sends
	return func() { close(sends) }
}

// claimLoop claims and dispatches batches until ctx ends, MaxMessages is
// reached (nil) or the store fails for good (an error).
func (w *Worker) claimLoop(ctx context.Context, stillOurs func() error, batches *sync.WaitGroup) error {
	clock := w.q.clock
	w.running = batches
	inFlight := make(chan struct{}, 2) // batches not yet recorded
	retry := backoff{min: w.opts.PollInterval, max: max(maxClaimBackoff, w.opts.PollInterval)}
	contended := backoff{min: contendedPause, max: max(contendedMax, w.opts.PollInterval)}
	var processed int
	// The cadence (wake.go): look before claiming; the last wait was ended
	// by a wake; that wake arrived during the wait (fresh), rather than
	// being left from before it, when it may have announced mail the last
	// claim took.
	look, woken, fresh := false, false, false
	for ctx.Err() == nil {
		if err := stillOurs(); err != nil {
			return err
		}
		if err := errors.Join(w.claims.check("claims", w.opts.FailAfter),
			w.writes.check("outcome writes", w.opts.FailAfter), w.renewals.check("lease renewals", w.opts.FailAfter)); err != nil {
			return fmt.Errorf("queue: lane %s: giving up: %w", w.q.lane.Name, err)
		}
		if w.opts.MaxMessages > 0 && processed >= w.opts.MaxMessages {
			w.log.Info("recycling after max messages", "processed", processed)
			return nil
		}
		limit := w.claimLimit()
		if w.opts.MaxMessages > 0 {
			limit = min(limit, w.opts.MaxMessages-processed)
		}
		pause, limit := w.brk.state(clock.Now(), limit)
		if pause > 0 {
			w.log.Warn("lane paused after connection failures", "for", pause)
			call(w.observer().BreakerFunc, BreakerEvent{Lane: w.q.lane.Name, Open: true, Until: clock.Now().Add(pause)})
			w.holdLane(ctx, pause)
			wait(ctx, clock, pause)
			continue
		}
		if w.pausedByOperator(ctx) {
			call(w.observer().ClaimFunc, ClaimEvent{Lane: w.q.lane.Name, Paused: true})
			wait(ctx, clock, w.opts.PollInterval)
			continue
		}
		// A row is due, as a look saw or a wake announced: a claim that
		// finds none lost it to another worker.
		expected := fresh
		if look {
			// A failed look claims anyway: the claim reports the error.
			due, err := w.look(ctx, woken)
			if err == nil && !due {
				woken, fresh = w.idle(ctx, w.pollWait())
				look = w.lookAfter(0, woken)
				continue
			}
			look = false
			expected = err == nil
		}
		select {
		case inFlight <- struct{}{}:
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second): // check the store again
			continue
		}
		start := clock.Now()
		n, done, err := w.dispatch(ctx, limit)
		processed += n
		call(w.observer().ClaimFunc, ClaimEvent{Lane: w.q.lane.Name, Rows: n, Err: err})
		if done != nil {
			batches.Add(1)
			go func() {
				defer batches.Done()
				if err := <-done; err != nil {
					w.log.Error("recording a batch failed", "err", err)
				}
				<-inFlight
			}()
		} else {
			<-inFlight
		}
		if err == nil {
			w.shareLane(n, woken, start, w.claimedDue)
		}
		switch {
		case err != nil && ctx.Err() != nil: // a claim cut short by shutdown is no failure
		case err != nil:
			pause := retry.next()
			w.log.Error("claim failed", "err", err, "retry_in", pause)
			wait(ctx, clock, pause)
		case n < limit && w.cursor.contended:
			// Other claimers are taking the rows ahead: they are enough
			// for the backlog, for now. Back off, twice as long each time
			// in a row, up to a second or the poll interval if longer:
			// with a 50 ms poll, 16 workers backing off at most 50 ms
			// kept colliding, and drained a backlog at half the rate of 4
			// on MariaDB (most of their claims read four rounds of rows
			// that others held, and many came back empty).
			retry.reset()
			// Jittered, between half and all of it, so that claimers that
			// collided part.
			d := contended.next()
			wait(ctx, clock, withJitter(d/2, 1))
		case n < limit && !w.cursor.cut:
			contended.reset()
			retry.reset()
			w.standBack(n, expected, woken, start, w.claimedDue)
			woken, fresh = w.idle(ctx, w.restWait(n, limit))
			look = w.lookAfter(n, woken)
			continue
		default:
			retry.reset()
			contended.reset()
		}
		woken, fresh = false, false
	}
	return nil
}

// contendedPause is the first pause after a claim that came back short
// because other claimers held the rows it found (cursor.contended), and
// contendedMax the longest, unless the poll interval is longer.
const (
	contendedPause = 250 * time.Millisecond
	contendedMax   = time.Second
)

// claimHorizon: a claim takes about as many rows as the worker can start
// sending within this long; the rows of a claim not started within
// startWait are given back.
const (
	claimHorizon = time.Second
	startWait    = 2 * claimHorizon
)

// claimLimit is the size of the next claim: what Concurrency sends start
// within claimHorizon at the average send time, between Concurrency and
// Batch; twice Concurrency until a send has been timed.
func (w *Worker) claimLimit() int {
	batch, c := w.opts.Batch, w.opts.Concurrency
	t := w.sendTime.Load()
	if t <= 0 {
		return min(batch, 2*c)
	}
	n := int64(c) * int64(claimHorizon) / t
	return int(max(min(n, int64(batch)), int64(min(c, batch))))
}

// timeSend adds a send's duration to the moving average claimLimit reads
// (weight 1/8: a change of pace shows within a few batches).
func (w *Worker) timeSend(d time.Duration) {
	for {
		old := w.sendTime.Load()
		next := max(int64(d), 1)
		if old > 0 {
			next = max(old+(next-old)/8, 1)
		}
		if w.sendTime.CompareAndSwap(old, next) {
			return
		}
	}
}

// finish waits for the batches in flight to be recorded: their sends may
// take ShutdownTimeout, writing their outcomes as long again. Then it
// abandons what is still unwritten.
func (w *Worker) finish(batches *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { batches.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(2*w.opts.ShutdownTimeout + statementTimeout):
	}
	close(w.abandon)
	<-done
	return fmt.Errorf("queue: lane %s: stopped with outcomes unwritten; those rows will be rescued once their lease expires, marked maybe delivered", w.q.lane.Name)
}

// dbBound bounds, on the client, each of the claim loop's own trips to the
// database (a claim, a look at the due index, at the lane's pause, at the
// breaker's hold, the resume of deferred mail). Every statement is bounded
// on the server (statementTimeout), but a connection that stops answering
// mid-statement (a network path that drops everything, without a reset)
// would otherwise hold the worker for good, and with it every later claim.
// A claim cut short by it is rolled back by the server; if its commit went
// through unseen, its rows' leases run out and the rescuer gives them
// back, unsent: nothing is lost or sent twice (TestDatabaseStallMidStatement).
// Outcomes and lease renewals have bounds of their own.
const dbBound = 3*statementTimeout + 5*time.Second

// wait waits d on clock; false when ctx ended first.
func wait(ctx context.Context, clock Clock, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-clock.After(d):
		return true
	}
}

func (w *Worker) count(f func(*WorkerStats)) {
	w.stats.Lock()
	defer w.stats.Unlock()
	f(&w.stats.WorkerStats)
}

func (w *Worker) countOutcomes(ups []rowUpdate) {
	w.count(func(s *WorkerStats) {
		for _, u := range ups {
			switch {
			case !u.hasOutcome:
				s.Released++
			case u.status == StatusSent:
				s.Sent++
			case u.status == StatusRetry:
				s.Retried++
			case u.status == StatusFailed:
				s.Failed++
			}
		}
	})
}

// storeFailed notes a failed statement in h and the stats.
func (w *Worker) storeFailed(h *health, err error) {
	if h != nil {
		h.failed(err)
	}
	w.troubleAt.Store(time.Now().UnixNano())
	conflict := isLockConflict(err)
	w.count(func(s *WorkerStats) {
		s.DBErrors++
		if conflict {
			s.Deadlocks++
		}
	})
	if conflict {
		w.log.Warn("database deadlock or lock wait timeout", "err", err, "deadlocks", w.Stats().Deadlocks)
		call(w.observer().DeadlockFunc, DeadlockEvent{Lane: w.q.lane.Name, Op: w.statementOf(h)})
	}
}

func (w *Worker) resumeLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.resume:
		}
		w.releaseLane(ctx)
		rctx, cancel := context.WithTimeout(ctx, dbBound)
		n, err := w.q.resumeDeferred(rctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				w.log.Error("provider is back, but resuming deferred mail failed", "err", err)
			}
			continue
		}
		w.log.Info("provider is back: deferred mail is due now", "rows", n)
	}
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

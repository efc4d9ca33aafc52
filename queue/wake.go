package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"
)

// The claim cadence.
//
// A worker whose last claim filled its batch claims again at once. One
// whose last claim came back short waits, and then first looks at the head
// of the due index (anyDue: one plain indexed read, no transaction, no
// lock) and claims only when a row is due there: an idle lane costs a
// read per poll, not a locking transaction, and SQLite's write lock is not
// taken for nothing. On a server's store, a wait after a claim that took
// rows ends in a claim without a look (lookAfter). The waits are spread
// with jitter, so that workers started together do not poll together:
// after an empty claim the poll interval, ±25 %; after a claim that took
// some rows but not a batch, that shortened by the share of the batch it
// filled, down to an eighth to a quarter of the interval (restWait). A nearly full claim says more
// mail is waiting; a claim of a few rows of a trickle does not, and with
// many workers the others' polls fall in between: an eighth of the
// interval after every such claim cost 16 workers about 1.5 times the CPU
// per mail of the whole interval (bench --steady, MariaDB, 50 ms poll,
// three paired runs).
//
// A wait ends early when the worker is woken (Wake): by the queue after an
// enqueue it committed itself, in the same process (Queue.Enqueue with a
// *sql.DB), by the application after committing its own transaction, or
// on PostgreSQL by a notification (listen.go), which reaches every worker
// of the lane in every process.
//
// Standing back. Many workers on one lane, each polling at the interval,
// poll the lane many times per interval, and every notification made each
// of them claim at once. With 16 workers most claims of a steady trickle
// came back empty (the row that the look saw or the notification announced
// had been taken by another worker's claim meanwhile), and on PostgreSQL
// 16 workers made six claims per mail. So a worker whose claim came back
// empty although a row was due (its look saw one, or a wake that came
// during its wait announced one) stands back a step, up to maxStandBack:
// its poll waits are twice as long per step, and a wake no longer makes it
// claim at once. It lets wakeDelay pass, then looks, and claims only if
// the mail is still there: on PostgreSQL it asks whether the row that the
// notification announced is still pending (stillWaiting), which is false
// when a worker in front took it. The workers that keep taking the mail
// stay in front and answer wakes at once, so a notification makes one
// worker claim, not all of them. A worker steps forward one step after
// stepForward claims in a row that took rows without one that came back
// empty, and back to the front at once when, woken, it still found mail
// that had been due for more than half of wakeDelay: nobody in front took
// it sooner. (That reads the rows' due time, set by the enqueuing
// process's clock; a clock behind the worker's makes rows look older and
// brings workers to the front, which is the plain cadence.)

// Sharing the lane. Each worker polling at the interval, 16 workers poll
// a lane four times as often as 4 do: their claims take a quarter of the
// rows each, and the lane pays four times the claims, looks and outcome
// writes for the same mail (bench --steady, MariaDB, 50 ms poll: 16
// workers drained at 66-88 % of the rate of 4, with 1.1-1.5 times their
// CPU per mail, and sent mail sooner than the poll interval asks). So a
// worker reads, from each claim it made after a timed wait, how long the
// longest-waiting row it took had been due when the claim began: about
// the time since the lane's previous claim, by any worker. When that is
// under a quarter of the poll interval, others claim the lane often
// enough, and the worker spreads its waits out, a quarter longer each
// time, up to maxSpread intervals on average; when it is over half an
// interval, it draws them back in. The spread is a wide random part on
// top of the plain wait (pollWait): a spread-out worker waits at least
// as long as one that is not, and anything up to twice the spread beyond
// that. With the spread as a factor, ±25 %, four intervals claimed the
// lane about as often as 4 workers do, but workers that a stall of the
// database had brought into step then all waited at least three
// intervals: p99 from commit to send 105-155 ms at 16 workers in one
// window. Drawn wide, the polls of workers in step part again at once.
// A worker alone on a lane is not slowed: its own waits are the gaps,
// and they are that short only after nearly full claims, whose short
// wait (restWait's least) does not spread. A claim that a
// wake started is not read: a wake claims at once whatever the spread,
// and the rows it finds are fresh because they were announced, not
// because the lane is crowded.

// spreadStep is the factor by which a worker spreads its waits out, or
// draws them in, after a claim.
const spreadStep = 1.25

// maxSpread is the furthest a worker spreads its waits out: four poll
// intervals on average (see Sharing the lane).
const maxSpread = 4

// shareLane spreads the worker's waits out or draws them in after a claim
// of n rows that began at start, the longest-waiting of them due since due
// (unix ms); woken: a wake started the claim. The time is read at the
// claim's start: a claim that waited for the database under load would
// otherwise find every row old, and draw the worker in when the lane is
// busiest.
func (w *Worker) shareLane(n int, woken bool, start time.Time, due int64) {
	if n == 0 || woken || due <= 0 {
		return
	}
	waited := time.Duration(start.UnixMilli()-due) * time.Millisecond
	switch {
	case waited < w.opts.PollInterval/4:
		w.spread = min(max(w.spread, 1)*spreadStep, maxSpread)
	case waited > w.opts.PollInterval/2:
		w.spread = max(w.spread/spreadStep, 1)
	}
}

// maxStandBack is the furthest a worker stands back: poll waits of up to
// 2^maxStandBack poll intervals.
const maxStandBack = 2

// Wake makes the worker claim at once if it is waiting for its next poll;
// when it is busy, its next wait is skipped. It never blocks. Call it after
// committing a transaction that enqueued mail for the worker's lane, when
// the worker runs in the same process; on PostgreSQL the worker is woken by
// a notification from any process, and Queue.Enqueue with a *sql.DB wakes
// the workers of its Queue itself.
func (w *Worker) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// idle waits d, or less if the worker is woken (woken is then true, and
// fresh when the wake came during the wait rather than before it) or ctx
// ends. A worker standing back waits wakeDelay more after a wake.
func (w *Worker) idle(ctx context.Context, d time.Duration) (woken, fresh bool) {
	select {
	case <-w.wake:
	default:
		select {
		case <-ctx.Done():
			return false, false
		case <-w.wake:
			fresh = true
		case <-w.q.clock.After(d):
			return false, false
		}
	}
	if w.back > 0 {
		w.wokenFor = w.announced.Load()
		wait(ctx, w.q.clock, w.wakeDelay())
	}
	return ctx.Err() == nil, fresh
}

// wakeDelay is how long a worker standing back lets a wake pass before it
// looks: an eighth of the poll interval, at most 25 ms (100 ms made the
// mail that the worker in front could not take at once wait that long:
// p99 150-230 ms on PostgreSQL, bench --steady on a loaded machine).
func (w *Worker) wakeDelay() time.Duration {
	return min(w.opts.PollInterval/8, 25*time.Millisecond)
}

// pollWait is the wait after a claim that found nothing: the poll
// interval, twice as long per step the worker stands back, ±25 %; spread
// out as the lane's other claimers allow (shareLane), plus a random part
// that makes the average that many times as long, and at most
// 2^maxStandBack intervals, with standing back counted in.
func (w *Worker) pollWait() time.Duration {
	base := w.opts.PollInterval << w.back
	d := withJitter(base*3/4, 2.0/3)
	spread := min(max(w.spread, 1), float64(w.opts.PollInterval<<maxStandBack)/float64(base))
	if spread > 1 {
		d += time.Duration(rand.Float64() * 2 * (spread - 1) * float64(base))
	}
	return d
}

// restWait is the wait after a claim that took n rows of the limit it
// asked for: the poll wait, shortened by the share of the claim that was
// filled, down to an eighth to a quarter of the poll interval. A claim
// that found a few rows of a trickle waits about the whole interval (the
// other workers' polls fall in between: a short wait here made many
// workers poll many times per mail), one that nearly filled its batch
// claims again soon.
func (w *Worker) restWait(n, limit int) time.Duration {
	d := w.pollWait()
	if n <= 0 || limit <= 0 {
		return d
	}
	d = d * time.Duration(limit-min(n, limit)) / time.Duration(limit)
	return max(d, withJitter(w.opts.PollInterval/8, 1))
}

// standBack moves the worker back or to the front after a claim of n rows
// that began at start (see Standing back above). expected: a look saw a
// due row, or a wake announced one; woken: the wait before the claim was
// ended by a wake; due is when the longest-waiting row claimed became due
// (unix ms). On PostgreSQL a worker standing back as far as it goes does
// not listen for notifications (listen.go).
func (w *Worker) standBack(n int, expected, woken bool, start time.Time, due int64) {
	switch {
	case n == 0 && expected:
		w.back = min(w.back+1, maxStandBack)
		w.served = 0
	case n == 0 || w.back == 0:
	case woken:
		if w.q.clock.Now().UnixMilli()-due > (w.wakeDelay() / 2).Milliseconds() {
			w.back, w.served = 0, 0
		}
	case w.unlisten.Load() && start.UnixMilli()-due > w.opts.PollInterval.Milliseconds():
		// Not listening, and the mail had waited a whole poll interval:
		// perhaps nobody listens any more. (Not on the other stores,
		// where nobody listens: there a backlog's old rows brought
		// workers standing back to the front at its every short claim,
		// and 16 of them drained it at 79-96 % of 4 instead of 90-110.)
		w.back, w.served = 0, 0
	default:
		if w.served++; w.served >= stepForward {
			w.back--
			w.served = 0
		}
	}
	if w.q.d.postgres {
		w.setListening(w.back < maxStandBack)
	}
}

// stepForward is how many claims in a row that took rows without one that
// lost its row to another worker bring a worker one step to the front.
const stepForward = 4

// wakers are the workers of a Queue running in this process, which its own
// enqueues wake.
type wakers struct {
	mu sync.Mutex
	ws []*Worker
}

func (k *wakers) add(w *Worker) (remove func()) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ws = append(k.ws, w)
	return func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		k.ws = slices.DeleteFunc(k.ws, func(o *Worker) bool { return o == w })
	}
}

// wake wakes every worker of the queue in this process.
func (k *wakers) wake() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, w := range k.ws {
		w.Wake()
	}
}

// anyDue reports whether a pending or retry row is due, from the head of
// the (status, next_run, id) index, without a transaction or a lock.
func (q *Queue) anyDue(ctx context.Context) (bool, error) {
	var id int64
	err := q.db.QueryRowContext(ctx, q.d.bounded(`SELECT id FROM `+q.table+
		` WHERE status IN (?, ?) AND next_run <= ? LIMIT 1`), StatusPending, StatusRetry, q.now()).Scan(&id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("queue: looking for due mail: %w", err)
	}
	return true, nil
}

// stillWaiting reports whether the row id is still pending: not claimed
// yet. A primary-key read, without a transaction or a lock.
func (q *Queue) stillWaiting(ctx context.Context, id int64) (bool, error) {
	var n int
	err := q.db.QueryRowContext(ctx, q.d.bounded(`SELECT COUNT(*) FROM `+q.table+` WHERE id = ? AND status = ?`), id, StatusPending).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("queue: looking for due mail: %w", err)
	}
	return n > 0, nil
}

// lookAfter tells whether to look before the next claim, after a wait
// that followed a claim of n rows and that a wake ended (woken) or not.
// A worker in front claims at once when woken. On a server's store it
// also claims without a look after a claim that took rows: mail is
// flowing, the look would find some and cost a round trip more per claim
// (one statement in thirteen, 16 workers on a steady stream, MariaDB, 50 ms
// poll). On SQLite the look costs no round trip, and a claim takes the
// write lock, so it always looks first.
func (w *Worker) lookAfter(n int, woken bool) bool {
	switch {
	case w.back > 0:
		return true
	case woken:
		return false
	}
	return n == 0 || w.q.d.sqlite
}

// look tells whether to claim after a wait: whether a row is due. A worker
// standing back that was woken by a notification asks only whether the
// last row announced when it was woken is still pending, wakeDelay later:
// when a worker in front took it already, there is nothing for this one to
// do.
func (w *Worker) look(ctx context.Context, woken bool) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, dbBound)
	defer cancel()
	if id := w.wokenFor; woken && w.back > 0 && id > 0 {
		return w.q.stillWaiting(ctx, id)
	}
	return w.q.anyDue(ctx)
}

// announce notes a notification's payload, the id of the row enqueued.
func (w *Worker) announce(payload string) {
	id, err := strconv.ParseInt(payload, 10, 64)
	if err != nil {
		return
	}
	for {
		old := w.announced.Load()
		if id <= old || w.announced.CompareAndSwap(old, id) {
			return
		}
	}
}

package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
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
// taken for nothing. The waits are spread with jitter, so that workers
// started together do not poll together: after an empty claim the poll
// interval, ±25 %; after a claim that took some rows but not a batch,
// that shortened by the share of the batch it filled, down to an eighth
// to a quarter of the interval (restWait). A nearly full claim says more
// mail is waiting; a claim of a few rows of a trickle does not, and with
// many workers the others' polls fall in between: an eighth of the
// interval after every such claim cost 16 workers about 1.5 times the CPU
// per mail of the whole interval (bench --steady, MariaDB, 50 ms poll,
// three paired runs).
//
// A wait ends early when the worker is woken (Wake): by the queue after an
// enqueue it committed itself, in the same process (Queue.Enqueue with a
// *sql.DB), by the application after committing its own transaction, or
// on PostgreSQL by a notification (listen.go). A woken worker claims at
// once, without the look.

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

// idle waits d, or less if the worker is woken (woken is then true) or ctx
// ends.
func (w *Worker) idle(ctx context.Context, d time.Duration) (woken bool) {
	select {
	case <-ctx.Done():
		return false
	case <-w.wake:
		return true
	case <-w.q.clock.After(d):
		return false
	}
}

// pollWait is the wait after a claim that found nothing: the poll
// interval, ±25 %.
func (w *Worker) pollWait() time.Duration {
	return withJitter(w.opts.PollInterval*3/4, 2.0/3)
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

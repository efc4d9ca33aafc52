package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/mailspool/mailspool/transport"
)

// flushDelay bounds how long a finished send's outcome waits to be written
// together with others of its batch.
const flushDelay = 200 * time.Millisecond

// Outcome writes that fail are retried after a backoff from minWriteBackoff
// doubling up to maxWriteBackoff: short, so that after a database pause
// the owner renews its leases and records its outcomes well before any
// rescuer acts (it waits LeaseMargin).
const (
	minWriteBackoff = 100 * time.Millisecond
	maxWriteBackoff = 2 * time.Second
)

// dispatch claims up to limit rows and starts their sends, taking a slot of
// the worker's concurrency for each; it returns once every row has started
// (or been given back), with the number of rows claimed and a channel that
// yields the result of recording the batch's outcomes once its sends are
// done and every outcome is written (nil when nothing was claimed).
func (w *Worker) dispatch(ctx context.Context, limit int) (int, <-chan error, error) {
	token := w.opts.ID + "." + strconv.FormatUint(w.seq.Add(1), 36)
	// On PostgreSQL the claim is not cut short when ctx ends (shutdown):
	// pgx sends a transaction's COMMIT under the context the transaction
	// began with, and a cancel arriving during it could leave the rows
	// committed as sending while the claim reported an error, leased to a
	// worker that then exited without them until their lease ran out (the
	// fault suite's SIGTERM scenario saw it). The MySQL and SQLite drivers
	// commit regardless of the context. The claim stays bounded by
	// dbBound; rows it took after ctx ended are given back below, unsent.
	claimCtx := ctx
	if w.q.d.postgres {
		claimCtx = context.WithoutCancel(ctx)
	}
	claimCtx, cancel := context.WithTimeout(claimCtx, dbBound)
	jobs, err := w.q.claim(claimCtx, token, limit, w.opts.LeaseMargin, &w.cursor)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			w.storeFailed(&w.claims, err)
		}
		return 0, nil, err
	}
	w.claims.ok()
	if len(jobs) == 0 {
		return 0, nil, nil
	}
	w.leases.hold(token, jobs)
	w.count(func(s *WorkerStats) { s.Claimed += int64(len(jobs)) })
	w.claimedDue = jobs[0].nextRun
	for _, j := range jobs[1:] {
		w.claimedDue = min(w.claimedDue, j.nextRun)
	}

	// Suspects (rows whose lease expired while they were sending, claimed
	// apart from ordinary rows: isolateSuspects) are sent with nothing else
	// of this worker in flight: the batches before them are recorded
	// first, and theirs before dispatch returns. If one kills the process,
	// no ordinary row is counted as crashed with it.
	suspect := jobs[0].crashes > 0
	if suspect && w.running != nil {
		w.running.Wait()
	}

	// Sends may outlive ctx by ShutdownTimeout; the bookkeeping after them
	// must not be cancelled at all.
	sendCtx, stopSends := context.WithCancel(context.WithoutCancel(ctx))
	stopAfter := context.AfterFunc(ctx, func() { time.AfterFunc(w.opts.ShutdownTimeout, stopSends) })

	var (
		decided []rowUpdate // rows settled without a send
		unsent  []*job      // rows given back unsent
		due     = w.q.now() // when they are due again
		results = make(chan rowUpdate, len(jobs))
		sending int
	)
	policy := w.q.lane.Retry
	// Rows that cannot start within startWait of the claim (the provider
	// slowed down after the claim was sized) are given back, so that the
	// claim loop never waits on a long batch and another worker with a
	// free sender can take them.
	late := time.NewTimer(startWait)
	defer late.Stop()
	tooLate := false
	for _, j := range jobs {
		now := w.q.clock.Now()
		if j.notAfter != 0 && now.UnixMilli() > j.notAfter {
			decided = append(decided, policy.next(j, event{kind: evLate}, now))
			w.observeOutcome(j, decided[len(decided)-1], kindExpired, nil, false, 0)
			continue
		}
		acquired := false
		if !tooLate {
			select {
			case w.slots <- struct{}{}:
				acquired = true
			case <-ctx.Done():
			case <-late.C:
				tooLate = true
			}
		}
		if open, until := w.brk.open(w.q.clock.Now()); open || !acquired || ctx.Err() != nil {
			if acquired {
				<-w.slots
			}
			unsent = append(unsent, j)
			if open {
				due = max(due, until.UnixMilli())
			}
			continue
		}
		sending++
		w.sends <- sendTask{ctx: sendCtx, j: j, results: results}
	}
	done := make(chan error, 1)
	record := func() {
		defer stopSends()
		defer stopAfter()
		done <- w.collect(token, decided, results, sending, unsent, due)
	}
	if suspect {
		record()
	} else {
		go record()
	}
	return len(jobs), done, nil
}

// loadFiles reads j's attachments into its message. When it cannot, it
// returns the row's next state instead: given back unsent, due again after
// a short pause, when the database failed; failed when the files are gone,
// since the mail is never sent without them.
func (w *Worker) loadFiles(ctx context.Context, j *job) (rowUpdate, bool) {
	files, err := w.q.loadFiles(ctx, j.id, j.files)
	if err == nil {
		j.msg.Attachments = files
		return rowUpdate{}, true
	}
	now := w.q.clock.Now()
	var missing *missingFilesError
	if errors.As(err, &missing) {
		u := w.q.lane.Retry.next(j, event{kind: evUnsendable, why: err.Error()}, now)
		w.observeOutcome(j, u, kindUnsendable, err, false, 0)
		return u, false
	}
	w.log.Warn("reading a mail's attachments failed; giving it back", "id", j.id, "err", err)
	return w.giveBack(j, now.Add(minWriteBackoff*10).UnixMilli(), now), false
}

// giveBack is the next state of j, given back unsent and due again at due
// (evReleased). One that would be due only after its not-after deadline
// fails now as expired, which is observed as its outcome.
func (w *Worker) giveBack(j *job, due int64, now time.Time) rowUpdate {
	u := w.q.lane.Retry.next(j, event{kind: evReleased, due: due}, now)
	if u.status == StatusFailed {
		w.observeOutcome(j, u, u.lastKind, nil, false, 0)
	}
	return u
}

// collect records a batch's outcomes as its sends finish: the outcomes that
// arrive within flushDelay of each other are written in one statement, so a
// fast batch costs one statement and a slow send does not hold back the
// rows sent before it. Once the sends are done it gives back the rows that
// were not sent (due at due). A write that fails is kept and retried with
// backoff until it succeeds or Run abandons the batch.
func (w *Worker) collect(token string, pending []rowUpdate, results <-chan rowUpdate, sending int, unsent []*job, due int64) error {
	retry := backoff{min: minWriteBackoff, max: maxWriteBackoff}
	timer := time.NewTimer(flushDelay)
	defer timer.Stop()
	now := sending == 0 // write without waiting for the timer
	for {
		if sending == 0 && len(pending) == 0 && unsent == nil {
			return nil
		}
		if !now {
			select {
			case u := <-results:
				pending = append(pending, u)
				if sending--; sending > 0 {
					continue
				}
				// The last send is done: write at once.
			case <-timer.C:
			case <-w.abandon:
				w.leases.forget(token)
				return fmt.Errorf("queue: gave up writing %d outcomes (%d sends still running, %d rows not started)", len(pending), sending, len(unsent))
			}
		}
		now = false
		if sending == 0 && unsent != nil { // give them back with the last outcomes
			at := w.q.clock.Now()
			for _, j := range unsent {
				pending = append(pending, w.giveBack(j, due, at))
			}
			unsent = nil
		}
		if len(pending) == 0 {
			timer.Reset(flushDelay)
			continue
		}
		if err := w.record(token, pending); err != nil {
			pause := retry.next()
			w.log.Warn("recording outcomes failed; keeping them to retry", "rows", len(pending), "retry_in", pause, "err", err)
			resetTimer(timer, pause)
			continue
		}
		pending = nil
		retry.reset()
		resetTimer(timer, flushDelay)
	}
}

func resetTimer(t *time.Timer, d time.Duration) {
	t.Stop()
	t.Reset(d)
}

// record writes outcomes of rows claimed under token (fenced) and counts
// them; outcomes rejected because the lease was taken over are counted as
// stale and logged.
func (w *Worker) record(token string, updates []rowUpdate) error {
	ctx, cancel := context.WithTimeout(context.Background(), statementTimeout+5*time.Second)
	defer cancel()
	applied, err := w.q.complete(ctx, token, updates)
	if err != nil {
		w.storeFailed(&w.writes, err)
		return err
	}
	w.writes.ok()
	w.leases.drop(token, updates)
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
	if j.files > 0 {
		// The files are read now and let go after the send, so that only
		// the mails being sent hold theirs (files.go).
		u, ok := w.loadFiles(ctx, j)
		if !ok {
			return u
		}
		defer fileGarbage.release(&j.msg)
	}
	release, wait, terr := w.acquire(ctx, j)
	if wait > 0 || terr != nil {
		if terr != nil {
			w.log.Warn("checking the send limits failed; the mail is given back", "id", j.id, "err", terr)
			wait = ThrottleRetry
		}
		now := w.q.clock.Now()
		return w.giveBack(j, now.Add(wait).UnixMilli(), now)
	}
	if j.maybeDelivered {
		ctx = transport.WithMaybeDelivered(ctx)
	}
	if rp := w.q.lane.ReturnPath; rp != nil {
		j.msg.ReturnPath = rp(j.id)
	}
	start := time.Now()
	receipt, err := w.tr.Send(ctx, &j.msg)
	took := time.Since(start)
	if release != nil {
		release(err)
	}
	w.timeSend(took)
	kind := verdict(err)
	now := w.q.clock.Now()
	streak, recovered := w.brk.record(laneFailure(kind, err), now)
	if recovered {
		call(w.observer().BreakerFunc, BreakerEvent{Lane: w.q.lane.Name})
		select { // the resume loop makes the mail the outage deferred due
		case w.resume <- struct{}{}:
		default:
		}
	}
	u := w.q.lane.Retry.next(j, event{kind: evAnswered, send: sendResult{receipt: receipt, err: err, kind: kind, connStreak: streak}}, now)
	w.observeOutcome(j, u, kind.String(), err, true, took)
	return u
}

// acquire takes j's send budget from the lane's Throttle, if it has one.
func (w *Worker) acquire(ctx context.Context, j *job) (release func(error), wait time.Duration, err error) {
	t := w.q.lane.Throttle
	if t == nil || t.AcquireFunc == nil {
		return nil, 0, nil
	}
	return t.AcquireFunc(ctx, ThrottledSend{Lane: w.q.lane.Name, ID: j.id, Address: j.msg.To.Address, Holder: j.token + "." + strconv.FormatInt(j.id, 36)})
}

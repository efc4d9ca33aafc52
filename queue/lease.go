package queue

import (
	"context"
	"errors"
	"sync"
	"time"
)

// leases is what a worker holds: for each claim token, the rows claimed
// under it whose new state is not yet written.
type leases struct {
	mu   sync.Mutex
	rows map[string]map[int64]struct{}
	end  map[string]int64 // the last lease end written per token (unix ms)
}

func (l *leases) hold(token string, jobs []*job) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rows == nil {
		l.rows, l.end = map[string]map[int64]struct{}{}, map[string]int64{}
	}
	ids := make(map[int64]struct{}, len(jobs))
	for _, j := range jobs {
		ids[j.id] = struct{}{}
	}
	l.rows[token] = ids
}

// drop forgets the rows of ups: their state is written (or given up).
func (l *leases) drop(token string, ups []rowUpdate) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := l.rows[token]
	for _, u := range ups {
		delete(ids, u.id)
	}
	if len(ids) == 0 {
		delete(l.rows, token)
		delete(l.end, token)
	}
}

// forget drops every row of token: its owner gave up on them.
func (l *leases) forget(token string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.rows, token)
	delete(l.end, token)
}

// has reports whether token is one of ours with rows still held.
func (l *leases) has(token string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.rows[token]
	return ok
}

// held returns a snapshot of the rows held per token.
func (l *leases) held() map[string][]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string][]int64, len(l.rows))
	for token, ids := range l.rows {
		for id := range ids {
			out[token] = append(out[token], id)
		}
	}
	return out
}

// nextEnd returns the lease end to write for token: at least want, and
// later than the last one written, so that rows affected counts every row
// still ours (MySQL counts only rows it changed).
func (l *leases) nextEnd(token string, want int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	end := max(want, l.end[token]+1)
	if _, ok := l.rows[token]; ok {
		l.end[token] = end
	}
	return end
}

// heartbeatLoop renews the leases of the rows the worker holds every third
// of LeaseMargin, or after a short backoff while renewing fails, until ctx
// ends.
func (w *Worker) heartbeatLoop(ctx context.Context) {
	retry := backoff{min: minWriteBackoff, max: maxWriteBackoff}
	interval := w.opts.LeaseMargin / 3
	pause := interval
	for wait(ctx, w.q.clock, pause) {
		pause = interval
		if err := w.heartbeat(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			pause = min(interval, retry.next())
			w.log.Warn("renewing leases failed", "err", err, "retry_in", pause)
			continue
		}
		retry.reset()
	}
}

// heartbeat renews every lease the worker holds once.
func (w *Worker) heartbeat(ctx context.Context) error {
	for token, ids := range w.leases.held() {
		end := w.leases.nextEnd(token, w.q.clock.Now().Add(w.opts.LeaseMargin).UnixMilli())
		stmtCtx, cancel := context.WithTimeout(ctx, statementTimeout+5*time.Second)
		n, err := w.q.extend(stmtCtx, token, ids, end)
		cancel()
		if err != nil {
			w.storeFailed(&w.renewals, err)
			return err
		}
		w.renewals.ok()
		if n < len(ids) && w.leases.has(token) {
			// Some rows were written meanwhile (then dropped) or taken over.
			w.log.Debug("lease renewal covered fewer rows than held", "token", token, "held", len(ids), "renewed", n)
		}
	}
	return nil
}

// slowLock is how long the rescuer may wait for its locks before it takes
// the database for paused.
const slowLock = statementTimeout / 2

// rescueLoop returns rows whose lease expired to pending or retry every
// RescueInterval. After the database was slow or failing — for any of the
// worker's statements: claims, outcome writes, lease renewals, rescues —
// it waits LeaseMargin first, and so it does for a lease some of whose rows
// another session held locked: the owners of those leases may be alive and
// retrying, and must get the first chance to renew them once the database
// answers again.
//
// A lease is rescued only once the rescuer has found it expired for a
// whole LeaseMargin, with no trouble since it first did. A pause can end
// just after the rescuer's statement began to wait for it; that statement
// then looks quick, and without this rule the rescuer would race the
// owners' renewals, waiting behind the same pause, for their leases, and
// the mail they sent during the pause would be sent again. An owner renews
// as soon as its waiting statement runs, or, if that failed, at its next
// heartbeat, at most a third of a margin later: a whole margin leaves room
// for a loaded machine. The rescuer looks again as soon as the margin has
// passed, so a killed worker's rows come back at most 2 × LeaseMargin +
// RescueInterval after its last heartbeat.
func (w *Worker) rescueLoop(ctx context.Context) {
	blocked := map[string]time.Time{} // tokens whose rows another session held
	seen := map[string]time.Time{}    // expired leases: when first found so
	round := map[string]bool{}        // expired leases found this round
	skip := func(token string) bool {
		if at, ok := blocked[token]; w.leases.has(token) || ok && time.Since(at) < w.opts.LeaseMargin {
			return true
		}
		round[token] = true
		first, ok := seen[token]
		if !ok || first.UnixNano() <= w.troubleAt.Load() {
			seen[token] = time.Now()
			return true
		}
		return time.Since(first) < w.opts.LeaseMargin
	}
	pause := w.opts.RescueInterval
	for wait(ctx, w.q.clock, pause) {
		pause = w.opts.RescueInterval
		if at := w.troubleAt.Load(); at != 0 && time.Since(time.Unix(0, at)) < w.opts.LeaseMargin {
			continue
		}
		for token, at := range blocked {
			if time.Since(at) >= w.opts.LeaseMargin {
				delete(blocked, token)
			}
		}
		clear(round)
		n, held, err := w.q.rescue(ctx, maxBatchRows, skip, slowLock)
		for token, first := range seen {
			if !round[token] { // renewed, finished or rescued since
				delete(seen, token)
				continue
			}
			// Look again as soon as this lease has been expired a margin.
			pause = max(min(pause, w.opts.LeaseMargin-time.Since(first)), time.Millisecond)
		}
		for _, token := range held {
			blocked[token] = time.Now()
		}
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errStoreSlow):
			w.troubleAt.Store(time.Now().UnixNano())
			w.log.Warn("rescuer: the database was slow to grant locks; waiting before rescuing", "for", w.opts.LeaseMargin)
		case err != nil:
			w.storeFailed(nil, err) // claims and writes tell whether the worker is stuck
			w.log.Error("rescuer failed", "err", err)
		case n > 0:
			w.count(func(s *WorkerStats) { s.Rescued += int64(n) })
			call(w.observer().RescueFunc, RescueEvent{Lane: w.q.lane.Name, Rows: n})
			w.log.Warn("rescued rows whose lease expired (a worker died or hung while sending them); they may have been delivered", "rows", n)
		}
	}
}

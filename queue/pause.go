package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/mailspool/mailspool/internal/textclip"
)

// Pause says why a lane's workers are not claiming.
type Pause struct {
	// By is "operator" (Queue.Pause, until Queue.Resume) or "breaker" (a
	// worker's breaker after connection failures, until Until).
	By     string    `json:"by"`
	Since  time.Time `json:"since,omitzero"` // operator pauses
	Until  time.Time `json:"until,omitzero"` // breaker holds
	Reason string    `json:"reason,omitempty"`
}

// maxPauseReason is the size of the reason columns.
const maxPauseReason = 255

// Pause stops every worker of the lane, in every process, from claiming
// mail within one PollInterval (or a second, when that is longer), until
// Resume. Mail still enqueues, and
// sends already started finish. reason is shown by Paused (at most 255
// bytes kept); one with a control or format character is refused, since
// operators read it on a terminal.
func (q *Queue) Pause(ctx context.Context, reason string) error {
	if problem := controlProblem(reason); problem != "" {
		return fmt.Errorf("queue: pause reason %s", problem)
	}
	upsert := `INSERT INTO ` + q.lanes + ` (tbl, paused_at, pause_reason) VALUES (?, ?, ?)
  ON DUPLICATE KEY UPDATE paused_at = VALUES(paused_at), pause_reason = VALUES(pause_reason)`
	if q.d.sqlite || q.d.postgres {
		upsert = `INSERT INTO ` + q.lanes + ` (tbl, paused_at, pause_reason) VALUES (?, ?, ?)
  ON CONFLICT (tbl) DO UPDATE SET paused_at = excluded.paused_at, pause_reason = excluded.pause_reason`
	}
	if _, err := q.db.ExecContext(ctx, q.d.rebind(upsert), q.lane.Table, q.now(), textclip.Prefix(reason, maxPauseReason)); err != nil {
		return fmt.Errorf("queue: pausing lane %s: %w", q.lane.Name, err)
	}
	return nil
}

// Resume ends an operator's Pause of the lane; a breaker's hold is the
// worker's and ends on its own.
func (q *Queue) Resume(ctx context.Context) error {
	if _, err := q.db.ExecContext(ctx, q.d.rebind(`UPDATE `+q.lanes+` SET paused_at = 0, pause_reason = '' WHERE tbl = ?`), q.lane.Table); err != nil {
		return fmt.Errorf("queue: resuming lane %s: %w", q.lane.Name, err)
	}
	return nil
}

// Paused returns what holds the lane now: an operator's pause, a breaker's
// hold, both or neither.
func (q *Queue) Paused(ctx context.Context) ([]Pause, error) {
	var pausedAt, breakerUntil int64
	var pauseReason, breakerReason string
	err := q.db.QueryRowContext(ctx, q.d.rebind(`SELECT paused_at, pause_reason, breaker_until, breaker_reason FROM `+q.lanes+` WHERE tbl = ?`), q.lane.Table).
		Scan(&pausedAt, &pauseReason, &breakerUntil, &breakerReason)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("queue: reading lane %s's pause: %w", q.lane.Name, err)
	}
	var ps []Pause
	if pausedAt != 0 {
		ps = append(ps, Pause{By: "operator", Since: time.UnixMilli(pausedAt), Reason: pauseReason})
	}
	if breakerUntil > q.now() {
		ps = append(ps, Pause{By: "breaker", Until: time.UnixMilli(breakerUntil), Reason: breakerReason})
	}
	return ps, nil
}

// operatorPaused reports whether an operator paused the lane.
// Its since and reason are set when it did.
func (q *Queue) operatorPaused(ctx context.Context) (paused bool, since time.Time, reason string, err error) {
	var pausedAt int64
	err = q.db.QueryRowContext(ctx, q.d.rebind(`SELECT paused_at, pause_reason FROM `+q.lanes+` WHERE tbl = ?`), q.lane.Table).Scan(&pausedAt, &reason)
	if errors.Is(err, sql.ErrNoRows) {
		return false, time.Time{}, "", nil
	}
	if err != nil {
		return false, time.Time{}, "", fmt.Errorf("queue: reading lane %s's pause: %w", q.lane.Name, err)
	}
	if pausedAt == 0 {
		return false, time.Time{}, "", nil
	}
	return true, time.UnixMilli(pausedAt), reason, nil
}

// holdByBreaker records that a worker's breaker holds the lane until
// until (zero: released), so that Paused can tell every process.
func (q *Queue) holdByBreaker(ctx context.Context, until time.Time, reason string) error {
	var ms int64
	if !until.IsZero() {
		ms = until.UnixMilli()
	}
	upsert := `INSERT INTO ` + q.lanes + ` (tbl, breaker_until, breaker_reason) VALUES (?, ?, ?)
  ON DUPLICATE KEY UPDATE breaker_until = VALUES(breaker_until), breaker_reason = VALUES(breaker_reason)`
	if q.d.sqlite || q.d.postgres {
		upsert = `INSERT INTO ` + q.lanes + ` (tbl, breaker_until, breaker_reason) VALUES (?, ?, ?)
  ON CONFLICT (tbl) DO UPDATE SET breaker_until = excluded.breaker_until, breaker_reason = excluded.breaker_reason`
	}
	if _, err := q.db.ExecContext(ctx, q.d.rebind(upsert), q.lane.Table, ms, textclip.Prefix(reason, maxPauseReason)); err != nil {
		return fmt.Errorf("queue: recording lane %s's breaker: %w", q.lane.Name, err)
	}
	return nil
}

// pauseWatch is the claim loop's view of the operator's pause.
type pauseWatch struct {
	read   bool // read once at least
	on     bool
	since  time.Time // when the operator paused it
	reason string
	next   time.Time // when to read it again
}

// pauseReadEvery is how often, at most, a worker reads whether an
// operator paused its lane, when its PollInterval is shorter. Read every
// 50 ms poll, it was one statement in thirteen of a busy lane's claim.
const pauseReadEvery = time.Second

// pausedByOperator reports whether an operator paused the lane, reading
// the database at most once per PollInterval or pauseReadEvery, whichever
// is longer; if the read fails, the last answer stands (the claim will
// report the database).
func (w *Worker) pausedByOperator(ctx context.Context) bool {
	now := w.q.clock.Now()
	if now.Before(w.paused.next) {
		return w.paused.on
	}
	w.paused.next = now.Add(max(w.opts.PollInterval, pauseReadEvery))
	opCtx, cancel := context.WithTimeout(ctx, dbBound)
	on, since, reason, err := w.q.operatorPaused(opCtx)
	cancel()
	if err != nil {
		return w.paused.on
	}
	if !w.paused.read || on != w.paused.on || !since.Equal(w.paused.since) || reason != w.paused.reason {
		call(w.observer().PauseFunc, PauseEvent{Lane: w.q.lane.Name, Paused: on, Since: since, Reason: reason})
	}
	w.paused.since, w.paused.reason, w.paused.read = since, reason, true
	if on != w.paused.on {
		if on {
			w.log.Warn("lane paused by an operator: not claiming until 'mailspool resume'")
		} else {
			w.log.Info("lane resumed by an operator")
		}
	}
	w.paused.on = on
	return on
}

// holdLane records the breaker's pause so that stats shows it in every
// process; a failure only costs the display.
func (w *Worker) holdLane(ctx context.Context, pause time.Duration) {
	reason := fmt.Sprintf("%d or more connection failures in a row", w.q.lane.Retry.BreakerThreshold)
	hctx, cancel := context.WithTimeout(ctx, dbBound)
	defer cancel()
	if err := w.q.holdByBreaker(hctx, w.q.clock.Now().Add(pause), reason); err != nil && ctx.Err() == nil {
		w.log.Warn("could not record the breaker's pause", "err", err)
	}
}

// releaseLane clears the breaker's hold once the provider answers again.
func (w *Worker) releaseLane(ctx context.Context) {
	hctx, cancel := context.WithTimeout(ctx, dbBound)
	defer cancel()
	if err := w.q.holdByBreaker(hctx, time.Time{}, ""); err != nil && ctx.Err() == nil {
		w.log.Warn("could not clear the breaker's pause", "err", err)
	}
}

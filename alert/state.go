package alert

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/mailspool/mailspool/internal/placeholder"
)

// postLease is how long the process that won a condition's row has to
// post; if it dies meanwhile another process posts after it.
const postLease = 2 * time.Minute

func defaultWorker() string {
	host, _ := os.Hostname()
	if len(host) > 40 {
		host = host[:40]
	}
	return host + "-" + strconv.Itoa(os.Getpid())
}

// started records this process's start for each lane and forgets runs
// older than a day.
func (a *Alerter) started(ctx context.Context) error {
	now := time.Now().UnixMilli()
	if _, err := a.db.ExecContext(ctx, placeholder.For(a.db, `DELETE FROM mailspool_runs WHERE seen_at < ?`), now-(24*time.Hour).Milliseconds()); err != nil {
		return fmt.Errorf("alert: forgetting old runs: %w", err)
	}
	for _, l := range a.watched() {
		if _, err := a.db.ExecContext(ctx, placeholder.For(a.db, `INSERT INTO mailspool_runs (lane, worker, started_at, seen_at, clean) VALUES (?, ?, ?, ?, 0)`),
			l.q.Lane().Name, a.opts.Worker, now, now); err != nil {
			return fmt.Errorf("alert: recording the start (run 'mailspool migrate' if mailspool_runs is missing): %w", err)
		}
	}
	return nil
}

// restarts refreshes this process's heartbeat and counts the processes of
// lane that ended without a clean exit in the last hour: rows not marked
// clean whose heartbeat stopped more than three intervals ago.
func (a *Alerter) restarts(ctx context.Context, lane string, now time.Time) (int, error) {
	ms := now.UnixMilli()
	if _, err := a.db.ExecContext(ctx, placeholder.For(a.db, `UPDATE mailspool_runs SET seen_at = ? WHERE lane = ? AND worker = ? AND clean = 0`), ms, lane, a.opts.Worker); err != nil {
		return 0, fmt.Errorf("alert: lane %s: heartbeat: %w", lane, err)
	}
	var n int
	err := a.db.QueryRowContext(ctx, placeholder.For(a.db, `SELECT COUNT(*) FROM mailspool_runs WHERE lane = ? AND clean = 0 AND worker <> ? AND seen_at < ? AND seen_at > ?`),
		lane, a.opts.Worker, ms-3*a.opts.Interval.Milliseconds(), ms-time.Hour.Milliseconds()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("alert: lane %s: counting restarts: %w", lane, err)
	}
	return n, nil
}

// condState is a condition's row in mailspool_alerts.
type condState struct {
	seenAt   int64 // unix ms a process last saw it active; 0 never
	notified int   // 1: the last message sent said firing
	since    int64 // unix ms it was notified firing
}

// load reads the row of (lane, cond), creating it when missing.
func (a *Alerter) load(ctx context.Context, lane, cond string) (condState, error) {
	var s condState
	read := func() error {
		return a.db.QueryRowContext(ctx, placeholder.For(a.db, `SELECT seen_at, notified, since FROM mailspool_alerts WHERE lane = ? AND cond = ?`), lane, cond).
			Scan(&s.seenAt, &s.notified, &s.since)
	}
	err := read()
	if errors.Is(err, sql.ErrNoRows) {
		// Another process may insert it at the same moment: then its
		// INSERT wins and ours fails on the key; read again either way.
		_, insErr := a.db.ExecContext(ctx, placeholder.For(a.db, `INSERT INTO mailspool_alerts (lane, cond) VALUES (?, ?)`), lane, cond)
		if err = read(); err != nil && insErr != nil {
			err = insErr
		}
	}
	if err != nil {
		return s, fmt.Errorf("alert: lane %s: reading the state of %s (run 'mailspool migrate' if mailspool_alerts is missing): %w", lane, cond, err)
	}
	return s, nil
}

// settle records what this process sees of one condition and, when the
// shared state says the last message sent no longer matches, takes the
// condition's lease and posts the alert or the recovery.
func (a *Alerter) settle(ctx context.Context, lane string, o observation, now time.Time) error {
	ms := now.UnixMilli()
	st, err := a.load(ctx, lane, o.cond)
	if err != nil {
		return err
	}
	if o.active {
		if _, err := a.db.ExecContext(ctx, placeholder.For(a.db, `UPDATE mailspool_alerts SET seen_at = ? WHERE lane = ? AND cond = ?`), ms, lane, o.cond); err != nil {
			return fmt.Errorf("alert: lane %s: recording %s: %w", lane, o.cond, err)
		}
		st.seenAt = ms
	}
	want := 0
	if st.seenAt > 0 && st.seenAt >= ms-2*a.opts.Interval.Milliseconds() {
		want = 1
	}
	if want == st.notified {
		return nil
	}
	res, err := a.db.ExecContext(ctx, placeholder.For(a.db, `UPDATE mailspool_alerts SET lease_until = ? WHERE lane = ? AND cond = ? AND notified = ? AND lease_until < ?`),
		ms+postLease.Milliseconds(), lane, o.cond, st.notified, ms)
	if err != nil {
		return fmt.Errorf("alert: lane %s: taking %s: %w", lane, o.cond, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return err // another process posts it
	}
	msg := Alert{Lane: lane, Condition: o.cond, State: "firing", Summary: o.summary, Value: o.value, Threshold: o.threshold, Worker: a.opts.Worker, At: now.UTC()}
	since := ms
	if want == 0 {
		msg.State = "resolved"
		since = st.since
		if st.since > 0 {
			t := time.UnixMilli(st.since).UTC()
			msg.Since = &t
		}
	}
	if err := a.post(ctx, msg); err != nil {
		// Let the next check (of any process) try again.
		_, _ = a.db.ExecContext(context.WithoutCancel(ctx), placeholder.For(a.db, `UPDATE mailspool_alerts SET lease_until = 0 WHERE lane = ? AND cond = ?`), lane, o.cond)
		return fmt.Errorf("alert: lane %s: %s %s: %w", lane, o.cond, msg.State, err)
	}
	if _, err := a.db.ExecContext(context.WithoutCancel(ctx), placeholder.For(a.db, `UPDATE mailspool_alerts SET notified = ?, since = ?, lease_until = 0 WHERE lane = ? AND cond = ?`),
		want, since, lane, o.cond); err != nil {
		return fmt.Errorf("alert: lane %s: recording the %s message of %s: %w", lane, msg.State, o.cond, err)
	}
	a.log.Info("alert sent", "lane", lane, "condition", o.cond, "state", msg.State, "summary", o.summary)
	return nil
}

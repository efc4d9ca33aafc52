package alert

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/mailspool/mailspool/internal/placeholder"
	"github.com/mailspool/mailspool/queue"
)

// Thresholds say when a lane needs attention. stuck > 0 and a paused lane
// always alert.
type Thresholds struct {
	// Backlog alerts when pending + retry + sending rows exceed it
	// (0: never).
	Backlog int64
	// FailureRate alerts when the last hour's failed / (sent + failed)
	// exceeds it, a fraction in (0, 1] (0: never) ...
	FailureRate float64
	// ... once at least MinAttempts mails finished in the hour (default 20).
	MinAttempts int64
	// Restarts alerts when this many worker processes of the lane ended
	// without a clean exit within the last hour (default 3; negative:
	// never).
	Restarts int
	// ComplaintRate alerts when the complaints ComplaintProvider reported
	// over ComplaintWindow (default 24h), against the mail the lane sent
	// in it, exceed this fraction (0: never; Gmail and Yahoo require less
	// than 0.003), once the lane sent at least MinAttempts mails in it.
	ComplaintRate     float64
	ComplaintWindow   time.Duration
	ComplaintProvider string // "ses" or "sendgrid": the lane's transport
	// Members says the lane's transport is a composite (failover(...),
	// roundrobin(...)): alert while one of its members is down (table
	// mailspool_members), whatever took it down (a 535, a suspended
	// account, connection failures).
	Members bool
}

// lane is one lane watched.
type lane struct {
	q *queue.Queue
	t Thresholds
}

// Options configure an Alerter. Zero fields take the defaults shown.
type Options struct {
	// WebhookURL receives the alerts (required): an http or https URL,
	// treated as a secret.
	WebhookURL string
	// Slack posts {"text": "..."} (a Slack or Mattermost incoming webhook)
	// instead of the JSON Alert.
	Slack bool
	// Interval is the time between checks (default 1m).
	Interval time.Duration
	// Worker names this process in mailspool_runs and in alerts; at most 64
	// bytes (default: the host name and pid).
	Worker string
	// Logger receives a line per alert sent and per failed post (default
	// slog.Default()).
	Logger *slog.Logger
}

// Alerter checks lanes and posts alerts. Create it with New, add each lane
// with Lane, and run it with Run beside the workers.
type Alerter struct {
	db     *sql.DB
	opts   Options
	client *retryablehttp.Client
	log    *slog.Logger

	mu    sync.Mutex
	lanes []lane
}

// New returns an Alerter posting to the webhook of opts; add the lanes to
// watch with Lane. It checks that the webhook URL is an http(s) URL,
// without echoing the URL.
func New(db *sql.DB, opts Options) (*Alerter, error) {
	u, err := url.Parse(opts.WebhookURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("alert: the webhook URL must be an http:// or https:// URL")
	}
	if opts.Interval == 0 {
		opts.Interval = time.Minute
	}
	if opts.Interval < 0 {
		return nil, fmt.Errorf("alert: negative check interval %v", opts.Interval)
	}
	if opts.Worker == "" {
		opts.Worker = defaultWorker()
	}
	if len(opts.Worker) > 64 {
		return nil, fmt.Errorf("alert: worker name %q is longer than 64 bytes", opts.Worker)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Alerter{
		db: db, opts: opts, client: newClient(time.Second),
		log: opts.Logger.With("component", "alert"),
	}, nil
}

// Validate checks the thresholds and fills in their defaults.
func (t *Thresholds) Validate() error {
	if t.MinAttempts == 0 {
		t.MinAttempts = 20
	}
	if t.Restarts == 0 {
		t.Restarts = 3
	}
	switch {
	case t.Backlog < 0:
		return fmt.Errorf("negative backlog threshold %d", t.Backlog)
	case !(t.FailureRate >= 0 && t.FailureRate <= 1): // NaN compares false with everything
		return fmt.Errorf("failure rate threshold %v is not a fraction between 0 and 1", t.FailureRate)
	case t.MinAttempts < 0:
		return fmt.Errorf("negative minimum attempts %d", t.MinAttempts)
	case t.Restarts < 0:
		return fmt.Errorf("negative restarts threshold %d", t.Restarts)
	case !(t.ComplaintRate >= 0 && t.ComplaintRate <= 1):
		return fmt.Errorf("complaint rate threshold %v is not a fraction between 0 and 1", t.ComplaintRate)
	case t.ComplaintRate > 0 && t.ComplaintProvider != "ses" && t.ComplaintProvider != "sendgrid":
		return fmt.Errorf("a complaint rate threshold needs a lane that sends through ses:// or sendgrid://, whose complaints mailspool serve receives (not %q)", t.ComplaintProvider)
	case t.ComplaintWindow < 0:
		return fmt.Errorf("negative complaint window %v", t.ComplaintWindow)
	}
	if t.ComplaintRate > 0 && t.ComplaintWindow == 0 {
		t.ComplaintWindow = DefaultComplaintWindow
	}
	return nil
}

// Lane adds q's lane with its thresholds. Add every lane before Run.
func (a *Alerter) Lane(q *queue.Queue, t Thresholds) error {
	name := q.Lane().Name
	if len(name) > 64 {
		return fmt.Errorf("alert: lane name %q is longer than 64 bytes", name)
	}
	if err := t.Validate(); err != nil {
		return fmt.Errorf("alert: lane %s: %w", name, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, l := range a.lanes {
		if l.q.Lane().Name == name {
			return fmt.Errorf("alert: lane %s added twice", name)
		}
	}
	a.lanes = append(a.lanes, lane{q: q, t: t})
	return nil
}

// watched returns the lanes added so far.
func (a *Alerter) watched() []lane {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]lane(nil), a.lanes...)
}

// Run records this process's start in mailspool_runs, then checks every
// Interval until ctx ends. Call Close after a clean shutdown; a process
// that never does counts as restarting.
func (a *Alerter) Run(ctx context.Context) {
	if err := a.started(ctx); err != nil && ctx.Err() == nil {
		a.log.Error("recording the worker's start failed", "err", err)
	}
	tick := time.NewTicker(a.opts.Interval)
	defer tick.Stop()
	for {
		if err := a.Check(ctx); err != nil && ctx.Err() == nil {
			a.log.Error("alert check failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Close records that this process ended cleanly (a recycle or a
// shutdown), so that its end does not count as a restart.
func (a *Alerter) Close(ctx context.Context) error {
	for _, l := range a.watched() {
		if _, err := a.db.ExecContext(ctx, placeholder.For(a.db, `UPDATE mailspool_runs SET clean = 1, seen_at = ? WHERE lane = ? AND worker = ?`),
			time.Now().UnixMilli(), l.q.Lane().Name, a.opts.Worker); err != nil {
			return fmt.Errorf("alert: recording a clean exit: %w", err)
		}
	}
	return nil
}

// Check evaluates every lane's conditions once, records what this process
// sees, and posts the alerts and recoveries that are due.
func (a *Alerter) Check(ctx context.Context) error {
	now := time.Now()
	var errs []error
	for _, l := range a.watched() {
		obs, err := a.observe(ctx, l, now)
		if err != nil {
			errs = append(errs, err) // and settle what it could see
		}
		for _, o := range obs {
			if err := a.settle(ctx, l.q.Lane().Name, o, now); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// observation is one condition as this process sees it now.
type observation struct {
	cond      string
	active    bool
	value     float64
	threshold float64
	summary   string // what is wrong, or what it is now
}

// observe evaluates the conditions of one lane. A condition it cannot
// read (the complaints' table, the members' health) is left out with its
// error, and the others are returned all the same: one failing query must
// not silence the lane's backlog or stuck alert.
func (a *Alerter) observe(ctx context.Context, l lane, now time.Time) ([]observation, error) {
	name := l.q.Lane().Name
	s, err := l.q.Stats(ctx)
	if err != nil {
		return nil, fmt.Errorf("alert: lane %s: %w", name, err)
	}
	t := l.t
	obs := []observation{{
		cond: "stuck", active: s.Stuck > 0, value: float64(s.Stuck),
		summary: fmt.Sprintf("%d rows stuck in sending past their lease", s.Stuck),
	}, {
		cond: "sender", active: s.SenderScope > 0, value: float64(s.SenderScope),
		summary: fmt.Sprintf("%d mails retried or failed because the provider refused our sender, account, domain or IP (mailspool list --status retry; mailspool show explains)", s.SenderScope),
	}}
	if t.Backlog > 0 {
		obs = append(obs, observation{
			cond: "backlog", active: s.Backlog > t.Backlog, value: float64(s.Backlog), threshold: float64(t.Backlog),
			summary: fmt.Sprintf("backlog %d (threshold %d)", s.Backlog, t.Backlog),
		})
	}
	if t.FailureRate > 0 {
		finished := s.SentLastHour + s.FailedLastHour
		obs = append(obs, observation{
			cond: "failure_rate", active: finished >= t.MinAttempts && s.FailureRate > t.FailureRate,
			value: s.FailureRate, threshold: t.FailureRate,
			summary: fmt.Sprintf("failure rate %.1f%% in the last hour, %d of %d (threshold %.1f%%)",
				100*s.FailureRate, s.FailedLastHour, finished, 100*t.FailureRate),
		})
	}
	var errs []error
	if t.ComplaintRate > 0 {
		if o, err := a.complaints(ctx, l, now); err != nil {
			errs = append(errs, fmt.Errorf("alert: lane %s: %w", name, err))
		} else {
			obs = append(obs, o)
		}
	}
	if t.Members {
		if o, err := a.members(ctx, name); err != nil {
			errs = append(errs, fmt.Errorf("alert: lane %s: %w", name, err))
		} else {
			obs = append(obs, o)
		}
	}
	if pauses, err := l.q.Paused(ctx); err != nil {
		errs = append(errs, fmt.Errorf("alert: lane %s: %w", name, err))
	} else {
		obs = append(obs, pausedObservation(pauses))
	}
	if t.Restarts > 0 {
		if n, err := a.restarts(ctx, name, now); err != nil {
			errs = append(errs, err)
		} else {
			obs = append(obs, observation{
				cond: "restarting", active: n >= t.Restarts, value: float64(n), threshold: float64(t.Restarts),
				summary: fmt.Sprintf("%d worker processes ended without a clean exit in the last hour (threshold %d)", n, t.Restarts),
			})
		}
	}
	return obs, errors.Join(errs...)
}

// pausedObservation is the "paused" condition of a lane with pauses.
func pausedObservation(pauses []queue.Pause) observation {
	paused := observation{cond: "paused", active: len(pauses) > 0, value: float64(len(pauses)), summary: "claiming runs"}
	var why []string
	for _, p := range pauses {
		switch p.By {
		case "operator":
			why = append(why, fmt.Sprintf("paused by an operator since %s (%s)", p.Since.UTC().Format(time.RFC3339), p.Reason))
		default:
			why = append(why, fmt.Sprintf("claiming held by the %s until %s (%s)", p.By, p.Until.UTC().Format(time.RFC3339), p.Reason))
		}
	}
	if len(why) > 0 {
		paused.summary = strings.Join(why, "; ")
	}
	return paused
}

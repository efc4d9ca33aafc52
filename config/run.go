package config

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/mailspool/mailspool/admin/statuspage"
	"github.com/mailspool/mailspool/metrics"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/suppress"
	"github.com/mailspool/mailspool/throttle"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/composite"
)

// RunOptions configure Run. Zero fields take the defaults shown.
type RunOptions struct {
	// Logger receives every worker's log lines (default slog.Default()).
	Logger *slog.Logger
	// Transports opens each lane's transport URL (default Transports()).
	Transports *transport.Mux
	// AdminListen, when not "", serves /metrics, /healthz and the status
	// page (at /) on this host:port (Config.AdminListen). Run refuses to
	// start when it is not a loopback address and StatusPage has no
	// credentials.
	AdminListen string
	// StatusPage configures the status page (Config.StatusPage; its
	// Logger is Logger).
	StatusPage statuspage.Options
	// Alerts, when not nil, checks each lane's Alerts thresholds and posts
	// alerts (Config.Alerts).
	Alerts *Alerts
}

// Run runs one worker per lane on db, each with its own transport, until
// ctx ends or one worker returns (MaxMessages reached, or shutdown): the
// first worker to stop stops the rest, so the process exits and its
// supervisor (systemd) starts it fresh. It first checks every lane's schema
// and opens every transport, and returns an error naming the lane if one
// fails; once the workers run it returns after they have drained, with the
// errors of the workers that failed (nil when they only stopped).
func Run(ctx context.Context, db *sql.DB, lanes []Lane, opts *RunOptions) error {
	if len(lanes) == 0 {
		return errors.New("config: Run with no lanes")
	}
	var o RunOptions
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Transports == nil {
		o.Transports = Transports()
	}
	// A lane without a transport stops everything before a row is claimed.
	for _, l := range lanes {
		if err := l.CheckTransport(); err != nil {
			return err
		}
	}
	log := o.Logger
	lanes = slices.Clone(lanes)
	if err := Screen(db, lanes); err != nil {
		return err
	}
	watch, err := newWatcher(db, lanes, o)
	if err != nil {
		return err
	}
	var onSlow func(throttle.SlowEvent)
	if watch.reg != nil && slices.ContainsFunc(lanes, func(l Lane) bool { return !l.Throttle.Empty() || len(l.sesQuota) > 0 }) {
		tm, err := metrics.NewThrottle(db)
		if err != nil {
			return err
		}
		watch.reg.MustRegister(tm)
		onSlow = tm.OnSlow
	}
	if err := Throttle(ctx, db, lanes, log, onSlow); err != nil {
		return err
	}
	workers := make([]*queue.Worker, 0, len(lanes))
	names := make([]string, 0, len(lanes)) // workers[i]'s lane
	for _, l := range lanes {
		if err := queue.CheckSchema(ctx, db, l.Lane.Table); err != nil {
			return err
		}
		q, err := queue.New(ctx, db, l.Lane, nil)
		if err != nil {
			return fmt.Errorf("config: lane %s: %w", l.Lane.Name, err)
		}
		// Every line about the lane names it; the worker adds the lane
		// to its own logger.
		llog := log.With("lane", l.Lane.Name)
		tr, err := OpenTransport(ctx, o.Transports, db, l.Lane.Name, l.Transport, llog)
		if err != nil {
			return fmt.Errorf("config: lane %s: %w", l.Lane.Name, err)
		}
		defer tr.Close()
		if ct, ok := tr.(*composite.Transport); ok {
			if err := watch.members(l.Lane.Name, ct); err != nil {
				return err
			}
		}
		tr = l.Rules.Transport(tr) // the operator's rules before the built-in table
		wo := l.Worker
		wo.Logger = log
		if wo.Observer, err = watch.lane(q, l); err != nil {
			return err
		}
		w, err := queue.NewWorker(q, tr, &wo)
		if err != nil {
			return fmt.Errorf("config: lane %s: %w", l.Lane.Name, err)
		}
		llog.Info("worker starting", "table", l.Lane.Table, "transport", transport.Redact(l.Transport), "worker", w.ID())
		workers = append(workers, w)
		names = append(names, l.Lane.Name)
	}
	// Every claim reads the suppression list: without its table each
	// claim would fail, for ever; refuse to start instead.
	if err := suppress.CheckSchema(ctx, db); err != nil {
		return err
	}
	// The first worker to return (recycle or shutdown) stops the others. A
	// worker that fails (its database kept failing, its SQLite file was
	// replaced) makes Run return its error, so that the process exits
	// non-zero and the supervisor restarts it.
	if err := watch.start(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopping := context.AfterFunc(ctx, watch.stopping)
	defer stopping()
	var wg sync.WaitGroup
	errs := make([]error, len(workers))
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			errs[i] = w.Run(ctx)
			if errs[i] != nil {
				log.Error("worker failed", "lane", names[i], "worker", w.ID(), "err", errs[i], statsAttr(w.Stats()))
				return
			}
			log.Info("worker stopped", "lane", names[i], "worker", w.ID(), statsAttr(w.Stats()))
		}()
	}
	wg.Wait()
	err = errors.Join(errs...)
	watch.stop(err == nil)
	return err
}

// statsAttr is a worker's counters as structured log fields.
func statsAttr(s queue.WorkerStats) slog.Attr {
	return slog.Group("stats", "claimed", s.Claimed, "sent", s.Sent, "retried", s.Retried, "failed", s.Failed,
		"released", s.Released, "stale", s.Stale, "rescued", s.Rescued, "db_errors", s.DBErrors, "deadlocks", s.Deadlocks)
}

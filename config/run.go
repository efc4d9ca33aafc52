package config

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/transport"
)

// RunOptions configure Run. Zero fields take the defaults shown.
type RunOptions struct {
	// Logger receives every worker's log lines (default slog.Default()).
	Logger *slog.Logger
	// Transports opens each lane's transport URL (default Transports()).
	Transports *transport.Mux
}

// Run runs one worker per lane on db, each with its own transport, until
// ctx ends or one worker returns (MaxMessages reached, or shutdown): the
// first worker to stop stops the rest, so the process exits and its
// supervisor (systemd) starts it fresh. It first checks every lane's schema
// and opens every transport, and returns an error naming the lane if one
// fails; once the workers run it returns after they have drained: nil,
// or the errors of the workers that failed.
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
	log := o.Logger
	workers := make([]*queue.Worker, 0, len(lanes))
	for _, l := range lanes {
		if err := queue.CheckSchema(ctx, db, l.Lane.Table); err != nil {
			return err
		}
		q, err := queue.New(ctx, db, l.Lane, nil)
		if err != nil {
			return fmt.Errorf("config: lane %s: %w", l.Lane.Name, err)
		}
		tr, err := o.Transports.OpenTransport(ctx, l.Transport)
		if err != nil {
			return fmt.Errorf("config: lane %s: %w", l.Lane.Name, err)
		}
		defer tr.Close()
		tr = l.Rules.Transport(tr) // the operator's rules before the built-in table
		wo := l.Worker
		wo.Logger = log
		w, err := queue.NewWorker(q, tr, &wo)
		if err != nil {
			return fmt.Errorf("config: lane %s: %w", l.Lane.Name, err)
		}
		log.Info("worker starting", "lane", l.Lane.Name, "table", l.Lane.Table, "transport", transport.Redact(l.Transport), "worker", w.ID())
		workers = append(workers, w)
	}
	// The first worker to return (recycle, shutdown or failure) stops the
	// others. A worker that failed (its database kept failing, its SQLite
	// file was replaced) makes Run return its error, so that the process
	// exits non-zero and the supervisor restarts it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(workers))
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			errs[i] = w.Run(ctx)
			if errs[i] != nil {
				log.Error("worker failed", "worker", w.ID(), "err", errs[i], "stats", fmt.Sprintf("%+v", w.Stats()))
				return
			}
			log.Info("worker stopped", "worker", w.ID(), "stats", fmt.Sprintf("%+v", w.Stats()))
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

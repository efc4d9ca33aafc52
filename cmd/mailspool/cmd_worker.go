package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/transport"
)

func runWorker(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "worker", "[--db URL] [--config FILE] [--lane NAME] [--max-messages N]")
	var sf storeFlags
	sf.register(fs)
	lane := fs.String("lane", "", "run only this lane (default: every lane, each with its own worker and transport)")
	maxMessages := fs.Int("max-messages", -1, "exit 0 after this many mails per lane so systemd restarts the process fresh (default: the lane's max_messages, 0 = never)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usageError{fmt.Sprintf("--log-level %q: want debug, info, warn or error", *logLevel)}
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))

	cfg, db, err := sf.open()
	if err != nil {
		return err
	}
	defer db.Close()
	lanes, err := cfg.pickLanes(*lane)
	if err != nil {
		return err
	}
	workers := make([]*queue.Worker, 0, len(lanes))
	for _, l := range lanes {
		if err := queue.CheckSchema(ctx, db, l.Lane.Table); err != nil {
			return err
		}
		q, err := queue.New(ctx, db, l.Lane, nil)
		if err != nil {
			return fmt.Errorf("lane %s: %w", l.Lane.Name, err)
		}
		tr, err := openTransport(ctx, l.Transport)
		if err != nil {
			return fmt.Errorf("lane %s: %w", l.Lane.Name, err)
		}
		defer tr.Close()
		tr = l.Rules.Transport(tr) // the operator's rules before the built-in table
		opts := l.Worker
		opts.Logger = log
		if *maxMessages >= 0 {
			opts.MaxMessages = *maxMessages
		}
		w, err := queue.NewWorker(q, tr, &opts)
		if err != nil {
			return fmt.Errorf("lane %s: %w", l.Lane.Name, err)
		}
		log.Info("worker starting", "lane", l.Lane.Name, "table", l.Lane.Table, "transport", transport.Redact(l.Transport), "worker", w.ID())
		workers = append(workers, w)
	}
	// The first worker to return (recycle or shutdown) stops the others: the
	// process exits and systemd starts it fresh.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			w.Run(ctx)
			log.Info("worker stopped", "worker", w.ID(), "stats", fmt.Sprintf("%+v", w.Stats()))
		}()
	}
	wg.Wait()
	return nil
}

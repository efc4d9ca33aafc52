package main

import (
	"context"
	"fmt"

	"github.com/mailspool/mailspool/config"
)

func runPause(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "pause", "--lane NAME [--reason TEXT] [--db URL] [--config FILE]")
	var lf laneFlags
	lf.register(fs)
	reason := fs.String("reason", "", "why, shown by stats (at most 255 bytes)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if lf.lane == "" {
		return usageError{"--lane is required: pausing is per lane"}
	}
	l, q, db, err := lf.openOne(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := q.Pause(ctx, *reason); err != nil {
		return err
	}
	if lf.asJSON {
		return writeJSON(e.stdout, map[string]any{"lane": l.Lane.Name, "paused": true})
	}
	fmt.Fprintf(e.stdout, "lane %s paused: its workers stop claiming within %s; enqueue goes on\n", l.Lane.Name, pollInterval(l))
	return nil
}

func runResume(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "resume", "--lane NAME [--db URL] [--config FILE]")
	var lf laneFlags
	lf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if lf.lane == "" {
		return usageError{"--lane is required: pausing is per lane"}
	}
	l, q, db, err := lf.openOne(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := q.Resume(ctx); err != nil {
		return err
	}
	if lf.asJSON {
		return writeJSON(e.stdout, map[string]any{"lane": l.Lane.Name, "paused": false})
	}
	fmt.Fprintf(e.stdout, "lane %s resumed: its workers claim again within %s\n", l.Lane.Name, pollInterval(l))
	return nil
}

// pollInterval says how soon workers notice a pause.
func pollInterval(l config.Lane) string {
	if d := l.Worker.PollInterval; d > 0 {
		return "one poll interval (" + d.String() + ")"
	}
	return "one poll interval"
}

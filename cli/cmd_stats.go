package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/mailspool/mailspool/config"
	"github.com/mailspool/mailspool/internal/termsafe"
	"github.com/mailspool/mailspool/queue"
)

// laneStats is one lane's entry of "mailspool stats --json".
type laneStats struct {
	Lane  string `json:"lane"`
	Table string `json:"table"`
	queue.Stats
	Paused []queue.Pause `json:"paused,omitempty"`
}

func runStats(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "stats", "[--db URL] [--config FILE] [--lane NAME] [--json]")
	var lf laneFlags
	lf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	lanes, qs, db, err := lf.openQueues(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	out, err := collectStats(ctx, lanes, qs)
	if err != nil {
		return err
	}
	if lf.asJSON {
		return writeJSON(e.stdout, out)
	}
	fmt.Fprintf(e.stdout, "config %s\n", lf.source())
	for _, s := range out {
		printStats(e, s)
	}
	return nil
}

// collectStats reads each lane's numbers and pauses.
func collectStats(ctx context.Context, lanes []config.Lane, qs []*queue.Queue) ([]laneStats, error) {
	out := make([]laneStats, len(qs))
	for i, q := range qs {
		s, err := q.Stats(ctx)
		if err != nil {
			return nil, fmt.Errorf("lane %s: %w", lanes[i].Lane.Name, err)
		}
		ps, err := q.Paused(ctx)
		if err != nil {
			return nil, fmt.Errorf("lane %s: %w", lanes[i].Lane.Name, err)
		}
		out[i] = laneStats{Lane: lanes[i].Lane.Name, Table: lanes[i].Lane.Table, Stats: s, Paused: ps}
	}
	return out, nil
}

func printStats(e *env, s laneStats) {
	fmt.Fprintf(e.stdout, "lane %s (table %s)\n", s.Lane, s.Table)
	fmt.Fprintf(e.stdout, "  backlog               %6d   (pending %d, retry %d, sending %d)\n", s.Backlog, s.Pending, s.Retry, s.Sending)
	fmt.Fprintf(e.stdout, "  failure rate, 1 hour  %5.1f%%   (%d failed, %d sent)\n", 100*s.FailureRate, s.FailedLastHour, s.SentLastHour)
	fmt.Fprintf(e.stdout, "  stuck in sending      %6d   (lease ended over %v ago)\n", s.Stuck, queue.StuckAfter)
	for _, p := range s.Paused {
		fmt.Fprintf(e.stdout, "  paused                %s\n", describePause(p))
	}
}

// describePause says who paused a lane, since or until when, and why.
func describePause(p queue.Pause) string {
	d := "by " + termsafe.Escape(p.By)
	if !p.Since.IsZero() {
		d += " since " + p.Since.UTC().Format(time.RFC3339)
	}
	if !p.Until.IsZero() {
		d += " until " + p.Until.UTC().Format(time.RFC3339)
	}
	if p.Reason != "" {
		d += ": " + termsafe.Escape(p.Reason)
	}
	return d
}

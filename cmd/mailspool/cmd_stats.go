package main

import (
	"context"
	"fmt"
	"time"
)

// laneStats is one lane's line of "mailspool stats".
type laneStats struct {
	Lane           string  `json:"lane"`
	Table          string  `json:"table"`
	Backlog        int64   `json:"backlog"`
	Pending        int64   `json:"pending"`
	Retry          int64   `json:"retry"`
	Sending        int64   `json:"sending"`
	SentLastHour   int64   `json:"sent_last_hour"`
	FailedLastHour int64   `json:"failed_last_hour"`
	FailureRate    float64 `json:"failure_rate_last_hour"`
	Stuck          int64   `json:"stuck_in_sending"`
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
	var out []laneStats
	for i, q := range qs {
		s, err := q.Stats(ctx)
		if err != nil {
			return fmt.Errorf("lane %s: %w", lanes[i].Lane.Name, err)
		}
		out = append(out, laneStats{
			Lane: lanes[i].Lane.Name, Table: lanes[i].Lane.Table, Backlog: s.Backlog, Pending: s.Pending, Retry: s.Retry,
			Sending: s.Sending, SentLastHour: s.SentLastHour, FailedLastHour: s.FailedLastHour, FailureRate: s.FailureRate, Stuck: s.Stuck,
		})
	}
	if lf.asJSON {
		return writeJSON(e.stdout, out)
	}
	for _, s := range out {
		printStats(e, s)
	}
	return nil
}

func printStats(e *env, s laneStats) {
	fmt.Fprintf(e.stdout, "lane %s (table %s)\n", s.Lane, s.Table)
	fmt.Fprintf(e.stdout, "  backlog               %6d   (pending %d, retry %d, sending %d)\n", s.Backlog, s.Pending, s.Retry, s.Sending)
	fmt.Fprintf(e.stdout, "  failure rate, 1 hour  %5.1f%%   (%d failed, %d sent)\n", 100*s.FailureRate, s.FailedLastHour, s.SentLastHour)
	fmt.Fprintf(e.stdout, "  stuck in sending      %6d   (lease ended over %v ago)\n", s.Stuck, 5*time.Minute)
}

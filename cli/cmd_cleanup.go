package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/mailspool/mailspool/internal/duration"
)

// keepForever is a retention no row reaches: for the status cleanup
// --status leaves alone.
const keepForever = 100 * 365 * 24 * time.Hour

func runCleanup(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "cleanup", "[--db URL] [--config FILE] [--lane NAME] [--older-than D] [--status sent|failed] [--dry-run] [--json]")
	var lf laneFlags
	lf.register(fs)
	olderThan := fs.String("older-than", "", "delete rows finished longer ago than this (90m, 12h, 30d; default: each lane's keep_sent and keep_failed)")
	status := filterString(fs, "status", "delete only sent or only failed rows (default: both)")
	dry := fs.Bool("dry-run", false, "count the rows that would be deleted and delete nothing")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var age time.Duration
	if *olderThan != "" {
		var err error
		if age, err = duration.Positive(*olderThan); err != nil {
			return usageError{"--older-than: " + err.Error()}
		}
	}
	switch *status {
	case "", "sent", "failed":
	default:
		return usageError{fmt.Sprintf("--status %q: want sent or failed", *status)}
	}
	lanes, qs, db, err := lf.openQueues(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	deleted := map[string]int64{}
	for i, q := range qs {
		name := lanes[i].Lane.Name
		r := lanes[i].Worker.Retention
		if age > 0 {
			r.Sent, r.Failed = age, age
		}
		switch *status {
		case "sent":
			r.Failed = keepForever
		case "failed":
			r.Sent = keepForever
		}
		if *dry {
			n, err := q.CountOld(ctx, r)
			if err != nil {
				return fmt.Errorf("lane %s: %w", name, err)
			}
			deleted[name] = n
			if !lf.asJSON {
				fmt.Fprintf(e.stdout, "lane %s: would delete %d old rows\n", name, n)
			}
			continue
		}
		n, err := q.Cleanup(ctx, r, func(total int64) {
			fmt.Fprintf(e.stderr, "\rlane %s: %d rows deleted", name, total)
		})
		if n > 0 {
			fmt.Fprintln(e.stderr)
		}
		deleted[name] = n
		if err != nil {
			return cleanupError{fmt.Errorf("lane %s: after %d rows: %w", name, n, err), deleted}
		}
		if !lf.asJSON {
			fmt.Fprintf(e.stdout, "lane %s: deleted %d old rows\n", name, n)
		}
	}
	if lf.asJSON {
		// With --dry-run, deleted counts what would be deleted.
		return writeJSON(e.stdout, struct {
			Deleted map[string]int64 `json:"deleted"`
			DryRun  bool             `json:"dry_run,omitempty"`
		}{deleted, *dry})
	}
	return nil
}

// cleanupError is a cleanup that failed after deleting rows: --json's
// error says how many per lane (error.deleted), which are gone for good.
type cleanupError struct {
	error
	deleted map[string]int64
}

func (e cleanupError) Unwrap() error { return e.error }

// Deleted is how many rows each lane had deleted when the cleanup failed.
func (e cleanupError) Deleted() map[string]int64 { return e.deleted }

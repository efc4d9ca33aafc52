package main

import (
	"context"
	"fmt"
)

func runCleanup(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "cleanup", "[--db URL] [--config FILE] [--lane NAME] [--json]")
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
	deleted := map[string]int64{}
	for i, q := range qs {
		name := lanes[i].Lane.Name
		n, err := q.Cleanup(ctx, lanes[i].Worker.Retention, func(total int64) {
			fmt.Fprintf(e.stderr, "\rlane %s: %d rows deleted", name, total)
		})
		if n > 0 {
			fmt.Fprintln(e.stderr)
		}
		deleted[name] = n
		if err != nil {
			return fmt.Errorf("lane %s: after %d rows: %w", name, n, err)
		}
		if !lf.asJSON {
			fmt.Fprintf(e.stdout, "lane %s: deleted %d old rows\n", name, n)
		}
	}
	if lf.asJSON {
		return writeJSON(e.stdout, map[string]any{"deleted": deleted})
	}
	return nil
}

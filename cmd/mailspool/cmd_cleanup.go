package main

import (
	"context"
	"fmt"
)

func runCleanup(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "cleanup", "[--db URL] [--config FILE] [--lane NAME] [--json]")
	var sf storeFlags
	sf.register(fs)
	lane := fs.String("lane", "", "only this lane")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, db, err := sf.open()
	if err != nil {
		return err
	}
	defer db.Close()
	lanes, err := cfg.pickLanes(*lane)
	if err != nil {
		return err
	}
	qs, err := queues(ctx, db, lanes, nil)
	if err != nil {
		return err
	}
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
		if !*asJSON {
			fmt.Fprintf(e.stdout, "lane %s: deleted %d old rows\n", name, n)
		}
	}
	if *asJSON {
		return writeJSON(e.stdout, map[string]any{"deleted": deleted})
	}
	return nil
}

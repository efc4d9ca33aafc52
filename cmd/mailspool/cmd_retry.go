package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// actionResult is the --json output of retry and cancel.
type actionResult struct {
	Lane    string `json:"lane"`
	Matched int64  `json:"matched"`
	Done    int64  `json:"done"`
}

func runRetry(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "retry", "[--db URL] [--config FILE] [--lane NAME] [--yes] [--json] (ID... | --failed [--since D] [--template T] [--to ADDR] [--kind K])")
	var lf laneFlags
	lf.register(fs)
	var ff filterFlags
	ff.register(fs)
	failed := fs.Bool("failed", false, "retry every failed mail that matches --since, --template, --to and --kind")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	f, err := ff.filter(time.Now())
	if err != nil {
		return err
	}
	switch {
	case *failed && len(pos) > 0:
		return usageError{"give mail ids or --failed, not both"}
	case !*failed && len(pos) == 0:
		return usageError{"give mail ids, or --failed to retry every failed mail (narrowed by --since, --template, --to, --kind)"}
	case !*failed && (ff != filterFlags{}):
		return usageError{"--since, --template, --to and --kind go with --failed"}
	}
	ids, err := parseIDs(pos)
	if err != nil {
		return err
	}
	l, q, db, err := lf.openOne(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	res := actionResult{Lane: l.Lane.Name, Matched: int64(len(ids))}
	if *failed {
		f.Status = "failed"
		if res.Matched, err = q.Count(ctx, f); err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "%d failed mails in lane %s match\n", res.Matched, l.Lane.Name)
		if res.Matched == 0 {
			return finishAction(e, lf.asJSON, res, "retried", nil)
		}
	} else {
		fmt.Fprintf(e.stderr, "%d mails in lane %s: ids %s\n", len(ids), l.Lane.Name, joinIDs(ids))
	}
	if !*yes && !confirm(e, "Retry them with fresh attempts?") {
		return errors.New("nothing retried (answer y, or pass --yes)")
	}
	var actErr error
	if *failed {
		res.Done, actErr = q.RetryFailed(ctx, f)
	} else {
		res.Done, actErr = q.Retry(ctx, ids...)
	}
	return finishAction(e, lf.asJSON, res, "retried", actErr)
}

func runCancel(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "cancel", "[--db URL] [--config FILE] [--lane NAME] [--json] ID...")
	var lf laneFlags
	lf.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageError{"give the ids of the mails to cancel"}
	}
	ids, err := parseIDs(pos)
	if err != nil {
		return err
	}
	l, q, db, err := lf.openOne(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	res := actionResult{Lane: l.Lane.Name, Matched: int64(len(ids))}
	var actErr error
	res.Done, actErr = q.Cancel(ctx, ids...)
	return finishAction(e, lf.asJSON, res, "cancelled", actErr)
}

// finishAction prints what an action did and returns the mails it left
// alone as the error.
func finishAction(e *env, asJSON bool, res actionResult, verb string, actErr error) error {
	if asJSON {
		if err := writeJSON(e.stdout, res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.stdout, "%s %d of %d mails in lane %s\n", verb, res.Done, res.Matched, res.Lane)
	}
	if actErr != nil {
		return refusedError(actErr)
	}
	return nil
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ", ")
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mailspool/mailspool/queue"
)

// actionResult is the --json output of retry and cancel.
type actionResult struct {
	Lane    string `json:"lane"`
	Matched int64  `json:"matched"`
	Done    int64  `json:"done"`
	// DryRun: nothing changed; Done is what the action would do.
	DryRun bool `json:"dry_run,omitempty"`
}

func runRetry(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "retry", "[--db URL] [--config FILE] [--lane NAME] [--yes] [--dry-run] [--json] (ID... | --failed [--since D] [--template T] [--to ADDR] [--kind K])")
	var lf laneFlags
	lf.registerOne(fs, "the lane (required when the config has more than one)")
	var ff filterFlags
	ff.register(fs)
	failed := fs.Bool("failed", false, "retry every failed mail that matches --since, --template, --to and --kind")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	dry := fs.Bool("dry-run", false, "print what would be retried and change nothing")
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
	if !*failed {
		return actOnIDs(e, lf.asJSON, l.Lane.Name, ids, idAction{
			verb: "retried", would: "retry", confirm: "Retry them with fresh attempts?",
			dry: *dry, yes: *yes, askFrom: 1,
			plan: func() (int64, error) { return q.WouldRetry(ctx, ids...) },
			do:   func() (int64, error) { return q.Retry(ctx, ids...) },
		})
	}
	res := actionResult{Lane: l.Lane.Name, DryRun: *dry}
	f.Status = "failed"
	if res.Matched, err = q.Count(ctx, f); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "%d failed mails in lane %s match\n", res.Matched, l.Lane.Name)
	if *dry {
		res.Done = res.Matched
		return finishAction(e, lf.asJSON, res, "would retry", nil)
	}
	if res.Matched == 0 {
		return finishAction(e, lf.asJSON, res, "retried", nil)
	}
	if !*yes && !confirm(e, "Retry them with fresh attempts?") {
		return errors.New("nothing retried (answer y, or pass --yes)")
	}
	var actErr error
	res.Done, actErr = q.RetryFailed(ctx, f)
	return finishAction(e, lf.asJSON, res, "retried", actErr)
}

func runCancel(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "cancel", "[--db URL] [--config FILE] [--lane NAME] [--yes] [--dry-run] [--json] ID...")
	var lf laneFlags
	lf.registerOne(fs, "the lane (required when the config has more than one)")
	yes := fs.Bool("yes", false, "do not ask for confirmation (asked when more than one mail would be cancelled)")
	dry := fs.Bool("dry-run", false, "print what would be cancelled and change nothing")
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
	return actOnIDs(e, lf.asJSON, l.Lane.Name, ids, idAction{
		verb: "cancelled", would: "cancel", confirm: "Cancel them? They will not be sent.",
		dry: *dry, yes: *yes, askFrom: 2,
		plan: func() (int64, error) { return q.WouldCancel(ctx, ids...) },
		do:   func() (int64, error) { return q.Cancel(ctx, ids...) },
	})
}

// idAction is retry or cancel of mails given by id.
type idAction struct {
	verb, would, confirm string
	dry, yes             bool
	// askFrom is how many mails the action must apply to before it asks
	// for confirmation (unless yes).
	askFrom int64
	// plan counts the mails the action would change, and names the
	// others in its error; do changes them.
	plan, do func() (int64, error)
}

// actOnIDs previews an action on ids, asks when it changes askFrom mails
// or more, and does it (or with dry only says what it would do).
func actOnIDs(e *env, asJSON bool, lane string, ids []int64, a idAction) error {
	res := actionResult{Lane: lane, Matched: int64(len(ids)), DryRun: a.dry}
	n, refused := a.plan()
	if refused != nil && !errors.Is(refused, queue.ErrNotFound) && !errors.Is(refused, queue.ErrWrongState) {
		return refused
	}
	fmt.Fprintf(e.stderr, "%d of %d mails in lane %s can be %s: ids %s\n", n, len(ids), lane, a.verb, joinIDs(ids))
	if a.dry {
		res.Done = n
		return finishAction(e, asJSON, res, "would "+a.would, refused)
	}
	if n == 0 {
		return finishAction(e, asJSON, res, a.verb, refused)
	}
	if !a.yes && n >= a.askFrom && !confirm(e, a.confirm) {
		return fmt.Errorf("nothing %s (answer y, or pass --yes)", a.verb)
	}
	var actErr error
	res.Done, actErr = a.do()
	return finishAction(e, asJSON, res, a.verb, actErr)
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

package cli

import (
	"context"
	"errors"
	"flag"
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
	fs := newFlagSet(e, "retry", "[--db URL] [--config FILE] [--lane NAME] [--yes] [--dry-run] [--json] (ID|LANE/ID... | --failed [--since D] [--template T] [--to ADDR] [--kind K])")
	var af actionFlags
	af.register(fs, "the lane (default: the one that has the ids; with --failed, required when the config has more than one)",
		"do not ask for confirmation", "print what would be retried and change nothing")
	var ff filterFlags
	ff.register(fs)
	failed := fs.Bool("failed", false, "retry every failed mail that matches --since, --template, --to and --kind")
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
	if !*failed {
		return af.actOnIDs(ctx, e, pos, idAction{
			verb: "retried", would: "retry", confirm: "Retry them with fresh attempts?", askFrom: 1,
			plan: (*queue.Queue).WouldRetry, do: (*queue.Queue).Retry,
		})
	}
	l, q, db, err := af.openOne(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	res := actionResult{Lane: l.Lane.Name, DryRun: af.dry}
	f.Status = "failed"
	if res.Matched, err = q.Count(ctx, f); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "%d failed mails in lane %s match\n", res.Matched, l.Lane.Name)
	if af.dry {
		res.Done = res.Matched
		return finishAction(e, af.asJSON, res, "would retry", nil)
	}
	if res.Matched == 0 {
		return finishAction(e, af.asJSON, res, "retried", nil)
	}
	if !af.yes && !confirm(e, "Retry them with fresh attempts?") {
		return errors.New("nothing retried (answer y, or pass --yes)")
	}
	var actErr error
	res.Done, actErr = q.RetryFailed(ctx, f)
	return finishAction(e, af.asJSON, res, "retried", actErr)
}

func runCancel(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "cancel", "[--db URL] [--config FILE] [--lane NAME] [--yes] [--dry-run] [--json] ID|LANE/ID...")
	var af actionFlags
	af.register(fs, "the lane (default: the one that has the ids)",
		"do not ask for confirmation (asked when more than one mail would be cancelled)", "print what would be cancelled and change nothing")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageError{"give the ids of the mails to cancel"}
	}
	return af.actOnIDs(ctx, e, pos, idAction{
		verb: "cancelled", would: "cancel", confirm: "Cancel them? They will not be sent.", askFrom: 2,
		plan: (*queue.Queue).WouldCancel, do: (*queue.Queue).Cancel,
	})
}

// actionFlags are the flags of the commands that change mails (retry,
// cancel): the lane flags, --yes and --dry-run.
type actionFlags struct {
	laneFlags
	yes, dry bool
}

func (f *actionFlags) register(fs *flag.FlagSet, laneHelp, yesHelp, dryHelp string) {
	f.registerOne(fs, laneHelp)
	fs.BoolVar(&f.yes, "yes", false, yesHelp)
	fs.BoolVar(&f.dry, "dry-run", false, dryHelp)
}

// idAction is retry or cancel of mails given by id.
type idAction struct {
	verb, would, confirm string
	// askFrom is how many mails the action must apply to before it asks
	// for confirmation (unless --yes).
	askFrom int64
	// plan counts the mails the action would change, and names the
	// others in its error; do changes them.
	plan, do func(*queue.Queue, context.Context, ...int64) (int64, error)
}

// actOnIDs is the shared body of retry and cancel by id: it reads the ids
// (ID or LANE/ID), opens the lane that holds them, previews the action,
// asks when it changes askFrom mails or more, and does it (or with
// --dry-run only says what it would do).
func (f *actionFlags) actOnIDs(ctx context.Context, e *env, args []string, a idAction) error {
	refs, err := parseRefs(args)
	if err != nil {
		return err
	}
	lanes, qs, db, err := f.openQueues(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	at, ids, err := locateAll(ctx, lanes, qs, refs)
	if err != nil {
		return err
	}
	q, lane := qs[at], lanes[at].Lane.Name
	res := actionResult{Lane: lane, Matched: int64(len(ids)), DryRun: f.dry}
	n, refused := a.plan(q, ctx, ids...)
	if refused != nil && !errors.Is(refused, queue.ErrNotFound) && !errors.Is(refused, queue.ErrWrongState) {
		return refused
	}
	fmt.Fprintf(e.stderr, "%d of %d mails in lane %s can be %s: ids %s\n", n, len(ids), lane, a.verb, joinIDs(ids))
	if f.dry {
		res.Done = n
		return finishAction(e, f.asJSON, res, "would "+a.would, refused)
	}
	if n == 0 {
		return finishAction(e, f.asJSON, res, a.verb, refused)
	}
	if !f.yes && n >= a.askFrom && !confirm(e, a.confirm) {
		return fmt.Errorf("nothing %s (answer y, or pass --yes)", a.verb)
	}
	var actErr error
	res.Done, actErr = a.do(q, ctx, ids...)
	return finishAction(e, f.asJSON, res, a.verb, actErr)
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

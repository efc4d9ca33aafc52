package cli

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/mailspool/mailspool/config"
	"github.com/mailspool/mailspool/queue"
)

func runPause(ctx context.Context, e *env, args []string) error {
	var reason *string
	return setPaused(ctx, e, args, true, "--lane NAME [--reason TEXT] [--db URL] [--config FILE]",
		func(fs *flag.FlagSet) { reason = fs.String("reason", "", "why, shown by stats (at most 255 bytes)") },
		func(ctx context.Context, q *queue.Queue) error { return q.Pause(ctx, *reason) },
		"lane %s paused: its workers stop claiming within %s; enqueue goes on\n")
}

func runResume(ctx context.Context, e *env, args []string) error {
	return setPaused(ctx, e, args, false, "--lane NAME [--db URL] [--config FILE]",
		func(*flag.FlagSet) {},
		func(ctx context.Context, q *queue.Queue) error { return q.Resume(ctx) },
		"lane %s resumed: its workers claim again within %s\n")
}

// setPaused is pause and resume: parse the flags (extra registers the
// command's own), open the one lane, apply act and report the new state.
func setPaused(ctx context.Context, e *env, args []string, paused bool, usage string,
	extra func(*flag.FlagSet), act func(context.Context, *queue.Queue) error, done string) error {
	name := "resume"
	if paused {
		name = "pause"
	}
	fs := newFlagSet(e, name, usage)
	var lf laneFlags
	lf.registerOne(fs, "the lane (required)")
	extra(fs)
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
	holds, err := q.Paused(ctx)
	if err != nil {
		return err
	}
	var byOperator *queue.Pause
	for i := range holds {
		if holds[i].By == "operator" {
			byOperator = &holds[i]
		}
	}
	if (byOperator != nil) == paused {
		// Already so: say it, change nothing (a pause keeps its time and reason).
		if lf.asJSON {
			return writeJSON(e.stdout, pauseResult{Lane: l.Lane.Name, Paused: paused, Unchanged: true})
		}
		if paused {
			fmt.Fprintf(e.stdout, "lane %s is already paused, by operator since %s", l.Lane.Name, byOperator.Since.UTC().Format(time.RFC3339))
			if byOperator.Reason != "" {
				fmt.Fprintf(e.stdout, ": %s", byOperator.Reason)
			}
			fmt.Fprintln(e.stdout, "; nothing changed")
		} else {
			fmt.Fprintf(e.stdout, "lane %s is not paused by an operator; nothing changed\n", l.Lane.Name)
		}
		return nil
	}
	if err := act(ctx, q); err != nil {
		return err
	}
	if lf.asJSON {
		return writeJSON(e.stdout, pauseResult{Lane: l.Lane.Name, Paused: paused})
	}
	fmt.Fprintf(e.stdout, done, l.Lane.Name, pollInterval(l))
	return nil
}

// pollInterval says how soon workers notice a pause.
func pollInterval(l config.Lane) string {
	if d := l.Worker.PollInterval; d > 0 {
		return "one poll interval (" + d.String() + ")"
	}
	return "one poll interval"
}

// pauseResult is "mailspool pause --json" and "resume --json".
type pauseResult struct {
	Lane   string `json:"lane"`
	Paused bool   `json:"paused"` // by an operator, after the command
	// Unchanged: the lane already was so; nothing changed.
	Unchanged bool `json:"unchanged,omitempty"`
}

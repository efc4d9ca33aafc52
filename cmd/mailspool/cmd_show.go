package main

import (
	"context"
	"fmt"
	"time"
)

func runShow(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "show", "--id N [--db URL] [--config FILE] [--lane NAME] [--json]")
	var lf laneFlags
	lf.register(fs)
	id := fs.Int64("id", 0, "row id, as enqueue printed it (required)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *id <= 0 {
		return usageError{"--id is required and must be positive"}
	}
	lanes, qs, db, err := lf.openQueues(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	if len(qs) > 1 {
		return usageError{fmt.Sprintf("the config has %d lanes: say which with --lane", len(qs))}
	}
	r, err := qs[0].Row(ctx, *id)
	if err != nil {
		return err
	}
	if lf.asJSON {
		return writeJSON(e.stdout, r)
	}
	at := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(e.stdout, "mail %d in lane %s\n", r.ID, lanes[0].Lane.Name)
	fmt.Fprintf(e.stdout, "  status       %s, %d of %d attempts\n", r.Status, r.Attempts, r.MaxAttempts)
	fmt.Fprintf(e.stdout, "  to           %s\n  subject      %s\n", r.To, r.Subject)
	fmt.Fprintf(e.stdout, "  message-id   <%s>\n", r.MessageID)
	if r.ProviderID != "" {
		fmt.Fprintf(e.stdout, "  provider id  %s   (search the provider's logs for it)\n", r.ProviderID)
	}
	switch {
	case r.LastKind == "sent" && r.LastError != "":
		fmt.Fprintf(e.stdout, "  last outcome sent (an earlier attempt: %s)\n", r.LastError)
	case r.LastKind == "sent":
		fmt.Fprintln(e.stdout, "  last outcome sent")
	case r.LastKind != "":
		fmt.Fprintf(e.stdout, "  last outcome %s %d: %s\n", r.LastKind, r.LastCode, r.LastError)
	}
	if r.LastRule != "" {
		fmt.Fprintf(e.stdout, "  decided by   rule %s   (mailspool classify explains a reply)\n", r.LastRule)
	}
	switch {
	case r.Crashes > 0:
		fmt.Fprintf(e.stdout, "  note         may have been delivered before: a worker stopped while sending it (lease expired %d time(s)), so it was sent again\n", r.Crashes)
	case r.MaybeDelivered:
		fmt.Fprintln(e.stdout, "  note         an earlier attempt may have been delivered (dropped after the data was sent)")
	}
	fmt.Fprintf(e.stdout, "  created      %s\n  next run     %s\n  sent         %s\n", at(r.CreatedAt), at(r.NextRun), at(r.SentAt))
	return nil
}

package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mailspool/mailspool/inbound"
	"github.com/mailspool/mailspool/internal/termsafe"
	"github.com/mailspool/mailspool/queue"
)

// listedRow is one line of "mailspool list --json".
type listedRow struct {
	Lane string `json:"lane"`
	queue.Row
}

func runList(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "list", "[--db URL] [--config FILE] [--lane NAME] [--status S] [--to ADDR] [--template T] [--kind K] [--since D] [--event TYPE] [--limit N] [--before ID] [--json]")
	var lf laneFlags
	lf.register(fs)
	var ff filterFlags
	ff.register(fs)
	status := fs.String("status", "", "only mail in this state: pending, sending, sent, retry or failed")
	limit := fs.Int("limit", 50, fmt.Sprintf("at most this many mails per lane (1..%d)", queue.MaxListLimit))
	event := fs.String("event", "", "only mail a provider reported this event for (mailspool serve): "+strings.Join(inbound.EventTypes, ", "))
	before := fs.Int64("before", 0, "only ids below this: the next page after the last id shown (needs --lane when there are several lanes)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *limit < 1 || *limit > queue.MaxListLimit {
		return usageError{fmt.Sprintf("--limit %d out of range 1..%d", *limit, queue.MaxListLimit)}
	}
	if *status != "" {
		if _, err := queue.ParseStatus(*status); err != nil {
			return usageError{"--status: " + err.Error()}
		}
	}
	f, err := ff.filter(time.Now())
	if err != nil {
		return err
	}
	f.Status = *status
	if *event != "" && !slices.Contains(inbound.EventTypes, *event) {
		return usageError{fmt.Sprintf("--event %q: want one of %s", *event, strings.Join(inbound.EventTypes, ", "))}
	}
	lanes, qs, db, err := lf.openQueues(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	if *event != "" {
		// The newest events of the type name the mails by provider id.
		store, err := inbound.OpenStore(db)
		if err != nil {
			return err
		}
		if f.ProviderIDs, err = store.ProviderMessageIDs(ctx, *event, queue.MaxListLimit); err != nil {
			return err
		}
	}
	if *before != 0 && len(qs) > 1 {
		return usageError{"--before: ids are per lane; say which with --lane"}
	}
	out := []listedRow{}
	full := false
	for i, q := range qs {
		rows, err := q.List(ctx, queue.ListOptions{Filter: f, Limit: *limit, Before: *before})
		if err != nil {
			return fmt.Errorf("lane %s: %w", lanes[i].Lane.Name, err)
		}
		for _, r := range rows {
			out = append(out, listedRow{Lane: lanes[i].Lane.Name, Row: r})
		}
		full = full || len(rows) == *limit
	}
	if lf.asJSON {
		return writeJSON(e.stdout, out)
	}
	if len(out) == 0 {
		fmt.Fprintln(e.stdout, "no mail matches")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LANE\tID\tSTATUS\tTRIES\tENQUEUED (UTC)\tTO\tTEMPLATE\tLAST OUTCOME")
	for _, r := range out {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d/%d\t%s\t%s\t%s\t%s\n", r.Lane, r.ID, r.Status, r.Attempts, r.MaxAttempts,
			r.CreatedAt.UTC().Format("2006-01-02 15:04:05"), termsafe.Escape(r.To), dash(termsafe.Escape(r.Template)), dash(lastOutcome(r.Row)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if full && len(qs) == 1 {
		fmt.Fprintf(e.stdout, "more: add --before %d\n", out[len(out)-1].ID)
	}
	return nil
}

// lastOutcome is a row's last outcome in a few words ("permanent 550").
func lastOutcome(r queue.Row) string {
	var b strings.Builder
	b.WriteString(r.LastKind)
	if r.LastCode != 0 {
		fmt.Fprintf(&b, " %d", r.LastCode)
	}
	return b.String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

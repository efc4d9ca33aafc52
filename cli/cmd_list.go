package cli

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mailspool/mailspool/config"
	"github.com/mailspool/mailspool/inbound"
	"github.com/mailspool/mailspool/internal/termsafe"
	"github.com/mailspool/mailspool/queue"
)

// listedRow is one line of "mailspool list --json".
type listedRow struct {
	Lane string `json:"lane"`
	// Ref is the mail as every command takes it: LANE/ID.
	Ref string `json:"ref"`
	queue.Row
}

func runList(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "list", "[--db URL] [--config FILE] [--lane NAME] [--status S] [--to ADDR] [--template T] [--kind K] [--since D] [--event TYPE] [--message-id ID] [--provider-id ID] [--limit N] [--before CURSOR] [--json]")
	var lf laneFlags
	lf.register(fs)
	var ff filterFlags
	ff.register(fs)
	status := filterString(fs, "status", "only mail in this state: pending, sending, sent, retry or failed")
	limit := fs.Int("limit", 50, fmt.Sprintf("at most this many mails, over every lane listed (1..%d)", queue.MaxListLimit))
	event := filterString(fs, "event", "only mail a provider reported this event for (mailspool serve): "+strings.Join(inbound.EventTypes, ", "))
	before := fs.String("before", "", "the next page: the cursor the last page's \"more:\" line gave (ID with one lane, LANE/ID,LANE/ID... with several)")
	messageID := filterString(fs, "message-id", "only the mail whose Message-ID header is this (with or without <>)")
	providerID := filterString(fs, "provider-id", "only the mail the provider (SES, SendGrid, the relay) accepted under this id")
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
	f.Status, f.MessageID, f.ProviderID = *status, *messageID, *providerID
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
	cur, err := parseCursor(*before, lanes)
	if err != nil {
		return err
	}
	// Each lane's newest page below its cursor, merged newest first; the
	// next cursor moves each lane past the rows shown of it, so that paging
	// neither repeats nor skips a mail whatever the lanes' clocks did.
	out := []listedRow{}
	more := false
	for i, q := range qs {
		name := lanes[i].Lane.Name
		rows, err := q.List(ctx, queue.ListOptions{Filter: f, Limit: *limit, Before: cur[name]})
		if err != nil {
			return fmt.Errorf("lane %s: %w", name, err)
		}
		for _, r := range rows {
			out = append(out, listedRow{Lane: name, Ref: refOf(name, r.ID), Row: r})
		}
		more = more || len(rows) == *limit
	}
	slices.SortStableFunc(out, func(a, b listedRow) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(a.Lane, b.Lane), cmp.Compare(b.ID, a.ID))
	})
	if len(out) > *limit {
		more, out = true, out[:*limit]
	}
	for _, r := range out {
		cur[r.Lane] = r.ID // out is newest first: the last one is the lowest
	}
	next := ""
	if more {
		next = cursorString(cur, len(qs) > 1)
	}
	if lf.asJSON {
		if next != "" {
			fmt.Fprintf(e.stderr, "more: add --before %s\n", next)
		}
		return writeJSON(e.stdout, out)
	}
	if len(out) == 0 {
		fmt.Fprintln(e.stdout, "no mail matches")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LANE\tID\tSTATUS\tTRIES\tENQUEUED (UTC)\tTO\tTEMPLATE\tLAST OUTCOME")
	for _, r := range out {
		id := strconv.FormatInt(r.ID, 10)
		if len(qs) > 1 {
			id = r.Ref
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\n", r.Lane, id, r.Status, r.Attempts, r.MaxAttempts,
			r.CreatedAt.UTC().Format("2006-01-02 15:04:05"), termsafe.Escape(r.To), dash(termsafe.Escape(r.Template)), dash(lastOutcome(r.Row)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(e.stdout, "more: add --before %s\n", next)
	}
	return nil
}

// parseCursor reads list's --before: an id below which a lane's page
// starts, per lane. One lane's cursor may be a bare id; with several it is
// LANE/ID,LANE/ID..., and a lane it does not name starts at its newest.
func parseCursor(s string, lanes []config.Lane) (map[string]int64, error) {
	cur := map[string]int64{}
	if s == "" {
		return cur, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		r, err := parseRef(part)
		if err != nil {
			return nil, usageError{"--before: " + err.Error()}
		}
		switch {
		case r.lane == "" && len(lanes) > 1:
			return nil, usageError{fmt.Sprintf("--before %s: ids are per lane; give the cursor the last page printed (LANE/ID,...), or --lane", s)}
		case r.lane == "":
			r.lane = lanes[0].Lane.Name
		}
		if _, err := laneIndex(lanes, r.lane); err != nil {
			return nil, usageError{"--before: " + err.Error()}
		}
		cur[r.lane] = r.id
	}
	return cur, nil
}

// cursorString writes a cursor parseCursor reads: LANE/ID,... sorted by
// lane, or the bare id of a single lane.
func cursorString(cur map[string]int64, multi bool) string {
	var parts []string
	for _, lane := range slices.Sorted(maps.Keys(cur)) {
		if multi {
			parts = append(parts, refOf(lane, cur[lane]))
		} else {
			parts = append(parts, strconv.FormatInt(cur[lane], 10))
		}
	}
	return strings.Join(parts, ",")
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

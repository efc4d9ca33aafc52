package cli

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/mailspool/mailspool/config"
	"github.com/mailspool/mailspool/internal/termsafe"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/throttle"
	"github.com/mailspool/mailspool/transport/composite"
)

// laneStats is one lane's entry of "mailspool stats --json".
type laneStats struct {
	Lane  string `json:"lane"`
	Table string `json:"table"`
	queue.Stats
	// OldestDueSeconds is queue.Stats.OldestDue in seconds; left out while
	// workers keep up.
	OldestDueSeconds float64       `json:"oldest_due_seconds,omitempty"`
	Paused           []queue.Pause `json:"paused,omitempty"`
	// Limits are the lane's send limits ([throttle]) with their state.
	Limits []limitStats `json:"limits,omitempty"`
	// Members are the members of a composite transport (failover,
	// roundrobin): each one's state in the shared health and its share of
	// the last hour's sent mail.
	Members []memberStats `json:"members,omitempty"`
}

// limitStats is one send limit of a lane, as configured and as it is now.
type limitStats struct {
	Key         string `json:"key"`
	Rate        string `json:"rate"`
	Concurrency int    `json:"concurrency,omitempty"`
	// Waiting is about how many mails that claims gave back wait for the
	// limit's turns (Scheduled at its rate).
	Waiting int64 `json:"waiting,omitempty"`
	throttle.KeyStatus
	// AheadSeconds is KeyStatus.Ahead: how long the next send waits.
	AheadSeconds float64 `json:"ahead_seconds,omitempty"`
}

// memberStats is one member of a lane's composite transport.
type memberStats struct {
	Member       string    `json:"member"`
	Weight       int       `json:"weight"`
	State        string    `json:"state"` // up or down
	DownSince    time.Time `json:"down_since,omitzero"`
	NextProbe    time.Time `json:"next_probe,omitzero"`
	Reason       string    `json:"reason,omitempty"`
	SentLastHour int64     `json:"sent_last_hour"`
	Share        float64   `json:"share"` // of the lane's sent mail in the last hour, 0..1
}

func runStats(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "stats", "[--db URL] [--config FILE] [--lane NAME] [--json]")
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
	out, err := collectStats(ctx, lanes, qs)
	if err != nil {
		return err
	}
	if err := collectLimits(ctx, db, lanes, out); err != nil {
		return err
	}
	for i := range out {
		if out[i].Members, err = collectMembers(ctx, db, lanes[i], qs[i]); err != nil {
			return fmt.Errorf("lane %s: %w", lanes[i].Lane.Name, err)
		}
	}
	if lf.asJSON {
		return writeJSON(e.stdout, out)
	}
	fmt.Fprintf(e.stdout, "config %s\n", lf.source())
	for _, s := range out {
		printStats(e, s)
	}
	return nil
}

// collectStats reads each lane's numbers and pauses.
func collectStats(ctx context.Context, lanes []config.Lane, qs []*queue.Queue) ([]laneStats, error) {
	out := make([]laneStats, len(qs))
	for i, q := range qs {
		s, err := q.Stats(ctx)
		if err != nil {
			return nil, fmt.Errorf("lane %s: %w", lanes[i].Lane.Name, err)
		}
		ps, err := q.Paused(ctx)
		if err != nil {
			return nil, fmt.Errorf("lane %s: %w", lanes[i].Lane.Name, err)
		}
		out[i] = laneStats{Lane: lanes[i].Lane.Name, Table: lanes[i].Lane.Table, Stats: s, OldestDueSeconds: s.OldestDue.Seconds(), Paused: ps}
	}
	return out, nil
}

func printStats(e *env, s laneStats) {
	fmt.Fprintf(e.stdout, "lane %s (table %s)\n", s.Lane, s.Table)
	fmt.Fprintf(e.stdout, "  backlog               %6d   (pending %d, retry %d, sending %d)\n", s.Backlog, s.Pending, s.Retry, s.Sending)
	fmt.Fprintf(e.stdout, "  failure rate, 1 hour  %5.1f%%   (%d failed, %d sent)\n", 100*s.FailureRate, s.FailedLastHour, s.SentLastHour)
	fmt.Fprintf(e.stdout, "  stuck in sending      %6d   (lease ended over %v ago)\n", s.Stuck, queue.StuckAfter)
	printLimits(e, s)
	for _, p := range s.Paused {
		fmt.Fprintf(e.stdout, "  paused                %s\n", describePause(p))
	}
	for _, m := range s.Members {
		fmt.Fprintf(e.stdout, "  member %-28s %-4s weight %d, %5.1f%% of the last hour's sent (%d)", termsafe.Escape(m.Member), m.State, m.Weight, 100*m.Share, m.SentLastHour)
		if m.State == "down" {
			fmt.Fprintf(e.stdout, ", down since %s, next probe %s: %s", m.DownSince.UTC().Format(time.RFC3339), m.NextProbe.UTC().Format(time.RFC3339), termsafe.Escape(m.Reason))
		}
		fmt.Fprintln(e.stdout)
	}
}

// collectMembers reads the members of a lane whose transport is a
// composite: state from the shared health, share from the lane's table.
func collectMembers(ctx context.Context, db *sql.DB, l config.Lane, q *queue.Queue) ([]memberStats, error) {
	if !composite.IsComposite(l.Transport) {
		return nil, nil
	}
	sp, err := composite.Parse(l.Transport)
	if err != nil {
		return nil, err
	}
	h, err := composite.NewSQL(db)
	if err != nil {
		return nil, err
	}
	states, err := h.Members(ctx, l.Lane.Name)
	if err != nil {
		return nil, fmt.Errorf("%w (run 'mailspool migrate' to create the member tables)", err)
	}
	byName := map[string]composite.State{}
	for _, st := range states {
		byName[st.Member] = st
	}
	sent, err := q.SentByMember(ctx)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, n := range sent {
		total += n
	}
	out := make([]memberStats, len(sp.Members))
	for i, m := range sp.Members {
		ms := memberStats{Member: m.Name, Weight: m.Weight, State: "up", SentLastHour: sent[m.Name]}
		if st := byName[m.Name]; !st.DownSince.IsZero() {
			ms.State, ms.DownSince, ms.NextProbe, ms.Reason = "down", st.DownSince, st.NextProbe, st.Reason
		}
		if total > 0 {
			ms.Share = float64(ms.SentLastHour) / float64(total)
		}
		out[i] = ms
	}
	return out, nil
}

// describePause says who paused a lane, since or until when, and why.
func describePause(p queue.Pause) string {
	d := "by " + termsafe.Escape(p.By)
	if !p.Since.IsZero() {
		d += " since " + p.Since.UTC().Format(time.RFC3339)
	}
	if !p.Until.IsZero() {
		d += " until " + p.Until.UTC().Format(time.RFC3339)
	}
	if p.Reason != "" {
		d += ": " + termsafe.Escape(p.Reason)
	}
	return d
}

// collectLimits adds each lane's send limits and their state to out.
func collectLimits(ctx context.Context, db *sql.DB, lanes []config.Lane, out []laneStats) error {
	var state map[string]throttle.KeyStatus
	for i, l := range lanes {
		p := l.Throttle
		if p.Empty() && len(p.Limits) == 0 {
			continue
		}
		if state == nil {
			st, err := throttle.Open(db)
			if err != nil {
				return err
			}
			keys, err := st.Status(ctx)
			if err != nil {
				return fmt.Errorf("%w (run mailspool migrate to make the send limits' tables)", err)
			}
			state = map[string]throttle.KeyStatus{}
			for _, k := range keys {
				state[k.Key] = k
			}
		}
		add := func(key string, r throttle.Rate, conc int) {
			ks, ok := state[key]
			if !ok {
				ks = throttle.KeyStatus{Key: key, Factor: 1}
			}
			ls := limitStats{Key: key, Rate: r.String(), Concurrency: conc, KeyStatus: ks, AheadSeconds: ks.Ahead.Seconds()}
			if !r.Off() && ks.Scheduled > 0 {
				ls.Waiting = int64(float64(ks.Scheduled) * float64(r.N) / float64(r.Per))
			}
			out[i].Limits = append(out[i].Limits, ls)
		}
		for _, lim := range p.Limits {
			add(lim.Key, lim.Rate, lim.Concurrency)
		}
		for _, g := range p.Groups {
			add("domain:"+g.Name, g.Rate, g.Concurrency)
		}
	}
	return nil
}

// printLimits prints a lane's send limits.
func printLimits(e *env, s laneStats) {
	for _, l := range s.Limits {
		conc := "unlimited"
		if l.Concurrency > 0 {
			conc = fmt.Sprintf("%d/%d in flight", l.InFlight, l.Concurrency)
		}
		fmt.Fprintf(e.stdout, "  limit %-22s rate %s, %s; next waits %v; %d granted, %d made to wait\n",
			termsafe.Escape(l.Key), l.Rate, conc, l.Ahead.Round(time.Millisecond), l.Granted, l.Refused)
		if l.Waiting > 0 {
			fmt.Fprintf(e.stdout, "    about %d mails wait behind it (turns promised for the next %v)\n", l.Waiting, l.Scheduled.Round(time.Second))
		}
		if l.Factor < 1 {
			fmt.Fprintf(e.stdout, "    slowed to %.0f%% by %s until %s, back to 100%% by %s (%d slow-downs)\n",
				100*l.Factor, termsafe.Escape(l.SlowReason), l.SlowUntil.Format(time.RFC3339), l.Recovered.Format(time.RFC3339), l.Slowdowns)
		}
	}
}

package cli

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/mail"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mailspool/mailspool/internal/textclip"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/fake"
)

// demoGroup is a set of demo mails the fake answers the same way.
type demoGroup struct {
	name  string // local part of the recipients; a +tag names the fake's step
	count int
	delay time.Duration
	about string
}

var demoGroups = []demoGroup{
	{"user", 30, 0, "accepted (1 in 5 sends first gets a 451 and is retried)"},
	{"user+550", 4, 0, "550 5.1.1 no such user: failed at once, never retried"},
	{"user+421", 3, 0, "421 4.7.0 every time: retried on the schedule, failed after 5 attempts"},
	{"user+450", 3, 0, "450 4.2.1 every time: retried on the schedule, failed after 5 attempts"},
	{"user+timeout", 2, 0, "never answered: longer connection schedule; a lone failure spends an attempt"},
	// Tagged +ok so that the script's 451 never lands on them: their
	// attempts show what the outage alone cost.
	{"later+ok", 10, 65 * time.Minute, "due at +1h05m, in the provider outage: the lane pauses, attempts are given back"},
}

// The provider is down (connection refused) during this part of the demo.
const (
	outageFrom = time.Hour
	outageTo   = 90 * time.Minute
)

// outage sends through down while the demo clock is in [from, to), else
// through normal.
type outage struct {
	clock        queue.Clock
	from, to     time.Time
	normal, down transport.Transport
}

func (o *outage) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	if now := o.clock.Now(); !now.Before(o.from) && now.Before(o.to) {
		return o.down.Send(ctx, m)
	}
	return o.normal.Send(ctx, m)
}

func (o *outage) Close() error { return errors.Join(o.normal.Close(), o.down.Close()) }

// demo is one run of the demo command: a lane on a fresh table, on a clock
// that runs speed times faster than real time.
type demo struct {
	e     *env
	db    *sql.DB
	lane  queue.Lane
	clock queue.Clock
	q     *queue.Queue
	ids   map[string][]int64 // the rows of each demoGroup, by name
}

func runDemo(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "demo", "[--db URL] [--speed N] [--hours H]")
	dbURL := fs.String("db", "", "database URL (default: a new SQLite file in a temporary directory, removed afterwards)")
	speed := fs.Float64("speed", 1500, "how many times faster than real time the demo clock runs")
	hours := fs.Float64("hours", 4, "simulated hours to run")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *speed < 1 || *hours <= 0 {
		return usageError{"--speed must be >= 1 and --hours > 0"}
	}
	if *dbURL == "" {
		dir, err := os.MkdirTemp("", "mailspool-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*dbURL = "sqlite:" + filepath.Join(dir, "demo.db")
	}
	d, err := openDemo(ctx, e, *dbURL, *speed)
	if err != nil {
		return err
	}
	defer d.db.Close()
	if err := d.enqueue(ctx); err != nil {
		return err
	}
	sends, refused, err := d.run(ctx, time.Duration(*hours*float64(time.Hour)))
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\nAfter %.1f simulated hours (%d sends, %d of them refused during the outage):\n\n", *hours, sends, refused)
	return d.report(ctx)
}

// openDemo opens the database, creates the demo lane's table and the queue.
func openDemo(ctx context.Context, e *env, dbURL string, speed float64) (*demo, error) {
	db, err := dburl.Open(dbURL)
	if err != nil {
		return nil, err
	}
	d := &demo{e: e, db: db, lane: queue.Lane{Name: "demo", Table: "mail_demo", RecipientLimit: queue.NoLimit},
		clock: newScaledClock(speed), ids: map[string][]int64{}}
	if err := queue.Migrate(ctx, db, d.lane.Table); err != nil {
		db.Close()
		return nil, err
	}
	if d.q, err = queue.New(ctx, db, d.lane, &queue.Options{Clock: d.clock}); err != nil {
		db.Close()
		return nil, err
	}
	fmt.Fprintf(e.stdout, "mailspool demo: database %s, fake transport, clock %.0f× real time\n\n", transport.Redact(dbURL), speed)
	return d, nil
}

// enqueue queues the demoGroups in one transaction, as an application
// would.
func (d *demo) enqueue(ctx context.Context) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	for _, g := range demoGroups {
		for i := range g.count {
			name, tag, _ := strings.Cut(g.name, "+")
			local := fmt.Sprintf("%s%02d", name, i+1)
			if tag != "" {
				local += "+" + tag
			}
			m := &transport.Message{
				From:    mail.Address{Name: "Demo Shop", Address: "noreply@shop.example"},
				To:      mail.Address{Address: local + "@example.com"},
				Subject: "Your order has shipped",
				Text:    "Hello,\n\nyour order is on its way.\n",
				HTML:    "<p>Hello,</p><p>your order is on its way.</p>",
			}
			id, err := d.q.Enqueue(ctx, tx, m, queue.Template("shipped"), queue.Delay(g.delay))
			if err != nil {
				return err
			}
			d.ids[g.name] = append(d.ids[g.name], id)
		}
		fmt.Fprintf(d.e.stdout, "  queued %2d × %-26s %s\n", g.count, g.name+"@example.com", g.about)
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	fmt.Fprintln(d.e.stdout)
	return nil
}

// run runs a worker on the fake provider, down during the outage, for the
// given demo time, showing progress; it returns how many sends were made
// and how many of them were refused.
func (d *demo) run(ctx context.Context, length time.Duration) (sends, refused int, err error) {
	fmt.Fprintf(d.e.stdout, "  the provider is down (connection refused) from +%v to +%v\n", outageFrom, outageTo)
	tr := fake.New(&fake.Options{Recipient: true, Script: []string{"ok", "ok", "ok", "ok", "451"}, Cycle: true, Timeout: 300 * time.Millisecond})
	down := fake.New(&fake.Options{Script: []string{"refused"}})
	start := d.clock.Now()
	provider := &outage{clock: d.clock, from: start.Add(outageFrom), to: start.Add(outageTo), normal: tr, down: down}
	defer provider.Close()
	w, err := queue.NewWorker(d.q, provider, &queue.WorkerOptions{
		// Leases are measured on the demo clock but sends take real time:
		// at 1500× a 300 ms timeout step is 7.5 minutes of demo time, and
		// the rescuer's default 5s would be 3 ms.
		ID: "demo", Batch: 20, Concurrency: 8, PollInterval: time.Minute, LeaseMargin: 24 * time.Hour, RescueInterval: 10 * time.Minute,
		CleanupInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return 0, 0, err
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	err = d.progress(ctx, start, start.Add(length), func() int { return tr.Attempts() + down.Attempts() })
	stop()
	if runErr := <-done; err == nil {
		err = runErr
	}
	if err == nil {
		err = ctx.Err()
	}
	return tr.Attempts() + down.Attempts(), down.Attempts(), err
}

// progress shows the rows by status until the demo clock reaches end: one
// line rewritten in place on a terminal, else a line every simulated half
// hour.
func (d *demo) progress(ctx context.Context, start, end time.Time, sends func() int) error {
	tty := isTerminal(d.e.stderr)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var lastLine time.Duration = -time.Hour
	for d.clock.Now().Before(end) && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
		counts, err := countByStatus(ctx, d.q)
		if err != nil {
			return err
		}
		elapsed := d.clock.Now().Sub(start).Truncate(time.Minute)
		line := fmt.Sprintf("  demo clock +%-8v pending %3d  sending %3d  retry %3d  sent %3d  failed %3d  (%d sends)",
			elapsed, counts["pending"], counts["sending"], counts["retry"], counts["sent"], counts["failed"], sends())
		switch {
		case tty:
			fmt.Fprint(d.e.stderr, "\r"+line)
		case elapsed-lastLine >= 30*time.Minute:
			fmt.Fprintln(d.e.stderr, line)
			lastLine = elapsed
		}
	}
	if tty {
		fmt.Fprintln(d.e.stderr)
	}
	return nil
}

// report prints what became of each demoGroup, the rows by status and the
// monitoring numbers.
func (d *demo) report(ctx context.Context) error {
	e := d.e
	for _, g := range demoGroups {
		summary := map[string]int{}
		var example queue.Row
		for _, id := range d.ids[g.name] {
			r, err := d.q.Row(ctx, id)
			if err != nil {
				return err
			}
			summary[fmt.Sprintf("%s after %d attempt(s)", r.Status, r.Attempts)]++
			example = r
		}
		var parts []string
		for k, n := range summary {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
		slices.Sort(parts)
		fmt.Fprintf(e.stdout, "  %-22s %s\n", g.name+":", strings.Join(parts, ", "))
		if example.LastError != "" && example.Status != "sent" {
			fmt.Fprintf(e.stdout, "  %-22s last error: %s\n", "", textclip.Clip(example.LastError, 90))
		}
	}
	counts, err := countByStatus(ctx, d.q)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\nRows by status: pending %d, sending %d, retry %d, sent %d, failed %d\n\n",
		counts["pending"], counts["sending"], counts["retry"], counts["sent"], counts["failed"])
	s, err := d.q.Stats(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "The three monitoring numbers:")
	printStats(e, laneStats{Lane: d.lane.Name, Table: d.lane.Table, Stats: s})
	return nil
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// countByStatus counts the demo's rows by status name.
func countByStatus(ctx context.Context, q *queue.Queue) (map[string]int64, error) {
	counts := map[string]int64{}
	for _, s := range []string{"pending", "sending", "sent", "retry", "failed"} {
		n, err := q.Count(ctx, queue.Filter{Status: s})
		if err != nil {
			return nil, err
		}
		counts[s] = n
	}
	return counts, nil
}

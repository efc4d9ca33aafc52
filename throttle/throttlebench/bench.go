// Package throttlebench is the proof of package throttle's limits
// (mailspool bench --throttle): worker processes drain mail to a limited
// and an unlimited domain through a fake transport that records the start
// and end of every send, and the run checks what the limits promise.
package throttlebench

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/mail"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/throttle"
	"github.com/mailspool/mailspool/transport"
)

// ChildCommand is the hidden command a worker process runs.
const ChildCommand = "bench-throttle-worker"

// The scenario's domains.
const (
	Limited   = "gmail.example"
	Unlimited = "other.example"
)

// Options configure a run. Zero fields take the numbers.
type Options struct {
	DB          string // database URL (migrated by Run)
	Workers     int    // worker processes (4)
	Concurrency int    // sends in flight per worker (16)
	Messages    int    // mails per domain (5000)
	Rate        throttle.Rate
	Limit       int           // the limited domain's concurrency (3)
	Latency     time.Duration // each send's duration (200ms)
	// Processes runs each worker as a child process of Executable
	// (default this program) running ChildCommand; otherwise goroutines,
	// each with its own connection pool.
	Processes  bool
	Executable string
	Progress   io.Writer // progress lines; nil: none
	// Stall gives up when no mail was sent for this long (1m).
	Stall time.Duration
}

func (o *Options) defaults() {
	if o.Workers == 0 {
		o.Workers = 4
	}
	if o.Concurrency == 0 {
		o.Concurrency = 16
	}
	if o.Messages == 0 {
		o.Messages = 5000
	}
	if o.Rate.Off() {
		o.Rate = throttle.Rate{N: 10, Per: time.Second, Burst: 1}
	}
	if o.Limit == 0 {
		o.Limit = 3
	}
	if o.Latency == 0 {
		o.Latency = 200 * time.Millisecond
	}
	if o.Stall == 0 {
		o.Stall = time.Minute
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// Span is one send: its recipient's domain and when it started and ended.
type Span struct {
	Domain string `json:"d"`
	Start  int64  `json:"s"` // unix ns
	End    int64  `json:"e"`
}

// Result is what a run measured, and what it found violated.
type Result struct {
	Workers, Concurrency, Messages int
	Rate                           string
	Limit                          int
	Latency                        time.Duration
	// The limited domain.
	MostInFlight      int     `json:"most_in_flight"`       // ≤ Limit
	MostStartsPerSpan int     `json:"most_starts_per_span"` // in any Rate.Per window: ≤ N + Burst
	LimitedRate       float64 `json:"limited_rate"`         // per Rate.Per: ≥ 95 % of N
	// The unlimited domain, per second: with the limit, and in a first
	// run with no limit configured.
	OtherRate     float64 `json:"other_rate"`
	OtherBaseline float64 `json:"other_baseline"`
	OtherShare    float64 `json:"other_share"` // ≥ 0.95
	// OtherAlone is its rate with no mail to the limited domain at all
	// (shown, not checked): what the limited domain costs it.
	OtherAlone      float64  `json:"other_alone"`
	OtherShareAlone float64  `json:"other_share_alone"`
	Violations      []string `json:"violations"`
}

// Run runs the scenario on fresh tables: the unlimited domain's mail
// alone, both domains with no limit (the unlimited domain's baseline), then
// with the limited domain limited, and checks the last run's sends.
func Run(ctx context.Context, o Options) (*Result, error) {
	o.defaults()
	db, err := dburl.Open(o.DB)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if err := throttle.Migrate(ctx, db); err != nil {
		return nil, err
	}
	stamp := time.Now().UnixNano() % 1e9
	r := &Result{Workers: o.Workers, Concurrency: o.Concurrency, Messages: o.Messages, Rate: o.Rate.String(), Limit: o.Limit, Latency: o.Latency}

	alone, err := o.drain(ctx, db, fmt.Sprintf("mailspool_tbench_%d_0", stamp), false, Unlimited)
	if err != nil {
		return nil, err
	}
	r.OtherAlone = rate(alone, Unlimited, time.Second)
	fmt.Fprintf(o.Progress, "%s alone: %.1f/s\n", Unlimited, r.OtherAlone)

	base, err := o.drain(ctx, db, fmt.Sprintf("mailspool_tbench_%d_a", stamp), false, Limited, Unlimited)
	if err != nil {
		return nil, err
	}
	r.OtherBaseline = rate(base, Unlimited, time.Second)
	fmt.Fprintf(o.Progress, "baseline (no limit): %s %.1f/s, %s %.1f/s\n", Unlimited, r.OtherBaseline, Limited, rate(base, Limited, time.Second))

	spans, err := o.drain(ctx, db, fmt.Sprintf("mailspool_tbench_%d_b", stamp), true, Limited, Unlimited)
	if err != nil {
		return nil, err
	}
	lim := only(spans, Limited)
	r.MostInFlight = MostInFlight(lim)
	r.MostStartsPerSpan = MostStartsIn(lim, o.Rate.Per)
	r.LimitedRate = rate(spans, Limited, o.Rate.Per)
	r.OtherRate = rate(spans, Unlimited, time.Second)
	if r.OtherBaseline > 0 {
		r.OtherShare = r.OtherRate / r.OtherBaseline
	}
	if r.OtherAlone > 0 {
		r.OtherShareAlone = r.OtherRate / r.OtherAlone
	}
	burst := max(o.Rate.Burst, 1)
	if r.MostInFlight > o.Limit {
		r.Violations = append(r.Violations, fmt.Sprintf("%d sends in flight at once to %s (limit %d)", r.MostInFlight, Limited, o.Limit))
	}
	if r.MostStartsPerSpan > o.Rate.N+burst {
		r.Violations = append(r.Violations, fmt.Sprintf("%d sends started within %v to %s (at most %d)", r.MostStartsPerSpan, o.Rate.Per, Limited, o.Rate.N+burst))
	}
	if r.LimitedRate < 0.95*float64(o.Rate.N) {
		r.Violations = append(r.Violations, fmt.Sprintf("%s got %.2f per %v, below 95%% of %d (starved)", Limited, r.LimitedRate, o.Rate.Per, o.Rate.N))
	}
	if r.OtherShare < 0.95 {
		r.Violations = append(r.Violations, fmt.Sprintf("%s ran at %.0f%% of its rate without the limit (want at least 95%%)", Unlimited, 100*r.OtherShare))
	}
	return r, nil
}

func only(spans []Span, domain string) []Span {
	var out []Span
	for _, s := range spans {
		if s.Domain == domain {
			out = append(out, s)
		}
	}
	return out
}

// rate is domain's sends per per, from its first start to its last end.
func rate(spans []Span, domain string, per time.Duration) float64 {
	ss := only(spans, domain)
	if len(ss) < 2 {
		return 0
	}
	first := slices.MinFunc(ss, func(a, b Span) int { return int(a.Start - b.Start) }).Start
	last := slices.MaxFunc(ss, func(a, b Span) int { return int(a.Start - b.Start) }).Start
	if last == first {
		return 0
	}
	return float64(len(ss)-1) / (float64(last-first) / float64(per))
}

// MostInFlight is the most spans open at one instant.
func MostInFlight(ss []Span) int {
	type edge struct{ t, d int64 }
	es := make([]edge, 0, 2*len(ss))
	for _, s := range ss {
		es = append(es, edge{s.Start, 1}, edge{s.End, -1})
	}
	slices.SortFunc(es, func(a, b edge) int {
		if a.t != b.t {
			return int(a.t - b.t)
		}
		return int(a.d - b.d) // an end before a start at the same instant
	})
	n, most := int64(0), int64(0)
	for _, e := range es {
		n += e.d
		most = max(most, n)
	}
	return int(most)
}

// MostStartsIn is the most spans started within any window of length w.
func MostStartsIn(ss []Span, w time.Duration) int {
	starts := make([]int64, len(ss))
	for i, s := range ss {
		starts[i] = s.Start
	}
	slices.Sort(starts)
	most, j := 0, 0
	for i := range starts {
		for starts[i]-starts[j] >= int64(w) {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

// drain enqueues the mails on a fresh table, runs the workers until every
// mail is sent, and returns their sends.
func (o *Options) drain(ctx context.Context, db *sql.DB, table string, limited bool, domains ...string) ([]Span, error) {
	if err := queue.Migrate(ctx, db, table); err != nil {
		return nil, err
	}
	defer db.ExecContext(context.WithoutCancel(ctx), `DROP TABLE `+table) //nolint:errcheck // best effort
	q, err := queue.New(ctx, db, queue.Lane{Table: table}, nil)
	if err != nil {
		return nil, err
	}
	total := len(domains) * o.Messages
	for i := 0; i < o.Messages; i += 250 {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		for k := i; k < min(i+250, o.Messages); k++ {
			for _, d := range domains {
				m := &transport.Message{From: mail.Address{Address: "bench@sender.example"}, To: mail.Address{Address: fmt.Sprintf("u%d@%s", k, d)}, Subject: "bench", Text: "bench"}
				if _, err := q.Enqueue(ctx, tx, m); err != nil {
					tx.Rollback() //nolint:errcheck // failing anyway
					return nil, err
				}
			}
		}
		if err := tx.Commit(); err != nil {
			return nil, err
		}
	}
	what := "no limit"
	if limited {
		what = fmt.Sprintf("%s limited to %s, concurrency %d", Limited, o.Rate, o.Limit)
	}
	fmt.Fprintf(o.Progress, "enqueued %d mails on %s; draining with %d workers x %d (%s)\n", total, table, o.Workers, o.Concurrency, what)
	args := WorkerArgs{DB: o.DB, Table: table, Concurrency: o.Concurrency, Latency: o.Latency}
	if limited {
		args.Rate, args.Limit = o.Rate, o.Limit
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	type out struct {
		spans []Span
		err   error
	}
	results := make(chan out, o.Workers)
	var stopChildren []func()
	for i := range o.Workers {
		a := args
		a.ID = fmt.Sprintf("tbench-%d", i)
		if !o.Processes {
			go func() { s, err := RunWorker(runCtx, a); results <- out{s, err} }()
			continue
		}
		exe := o.Executable
		if exe == "" {
			if exe, err = os.Executable(); err != nil {
				return nil, err
			}
		}
		cmd := exec.Command(exe, append([]string{ChildCommand}, a.flags()...)...)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("starting worker process %d: %w", i, err)
		}
		stopChildren = append(stopChildren, func() { stdin.Close() })
		go func() {
			var spans []Span
			dec := json.NewDecoder(bufio.NewReader(stdout))
			var err error
			for {
				var s Span
				if err = dec.Decode(&s); err != nil {
					break
				}
				spans = append(spans, s)
			}
			if errors.Is(err, io.EOF) {
				err = nil
			}
			if werr := cmd.Wait(); werr != nil {
				err = fmt.Errorf("worker process %d: %w", i, werr)
			}
			results <- out{spans, err}
		}()
	}
	// Wait for every mail to be sent, giving up after Stall without one.
	last, lastAt, began := -1, time.Now(), time.Now()
	for {
		var sent int
		if err := db.QueryRowContext(ctx, fmt.Sprintf(`SELECT COUNT(*) FROM %s WHERE status = %d`, table, queue.StatusSent)).Scan(&sent); err != nil {
			return nil, err
		}
		if sent != last {
			last, lastAt = sent, time.Now()
			fmt.Fprintf(o.Progress, "  %6.1fs: %d of %d sent\n", time.Since(began).Seconds(), sent, total)
		}
		if sent == total {
			break
		}
		if time.Since(lastAt) > o.Stall {
			stop()
			for _, f := range stopChildren {
				f()
			}
			return nil, fmt.Errorf("no mail sent for %v: %d of %d sent", o.Stall, sent, total)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	stop()
	for _, f := range stopChildren {
		f()
	}
	var spans []Span
	var errs []error
	for range o.Workers {
		r := <-results
		spans = append(spans, r.spans...)
		errs = append(errs, r.err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(spans) != total {
		return nil, fmt.Errorf("%d sends recorded for %d mails: each must be sent once", len(spans), total)
	}
	return spans, nil
}

// WorkerArgs configure one worker.
type WorkerArgs struct {
	DB, Table, ID string
	Concurrency   int
	Latency       time.Duration
	Rate          throttle.Rate // the limited domain's; zero: no limit
	Limit         int
}

func (a WorkerArgs) flags() []string {
	return []string{"--db", a.DB, "--table", a.Table, "--id", a.ID, "--concurrency", fmt.Sprint(a.Concurrency), "--latency", a.Latency.String(),
		"--rate", fmt.Sprint(a.Rate.N), "--per", a.Rate.Per.String(), "--burst", fmt.Sprint(a.Rate.Burst), "--limit", fmt.Sprint(a.Limit)}
}

// recorder is the fake transport: each send takes the latency and is
// recorded.
type recorder struct {
	latency time.Duration
	mu      sync.Mutex
	spans   []Span
}

func (r *recorder) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	start := time.Now()
	select {
	case <-time.After(r.latency):
	case <-ctx.Done():
		return transport.Receipt{}, &transport.Error{Kind: transport.Temporary, Detail: "cancelled", Err: ctx.Err()}
	}
	end := time.Now()
	r.mu.Lock()
	r.spans = append(r.spans, Span{Domain: m.To.Address[strings.LastIndexByte(m.To.Address, '@')+1:], Start: start.UnixNano(), End: end.UnixNano()})
	r.mu.Unlock()
	return transport.Receipt{MessageID: "<bench>"}, nil
}

func (r *recorder) Close() error { return nil }

// RunWorker runs one worker until ctx ends and returns its sends.
func RunWorker(ctx context.Context, a WorkerArgs) ([]Span, error) {
	db, err := dburl.Open(a.DB)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	lane := queue.Lane{Table: a.Table}
	if !a.Rate.Off() || a.Limit > 0 {
		st, err := throttle.Open(db)
		if err != nil {
			return nil, err
		}
		p := &throttle.Policy{Lane: a.Table, Store: st, Groups: []throttle.Group{{Name: "bench", Match: []string{Limited}, Rate: a.Rate, Concurrency: a.Limit}}}
		if lane.Throttle, err = p.Throttle(); err != nil {
			return nil, err
		}
	}
	q, err := queue.New(ctx, db, lane, nil)
	if err != nil {
		return nil, err
	}
	rec := &recorder{latency: a.Latency}
	w, err := queue.NewWorker(q, rec, &queue.WorkerOptions{ID: a.ID, Concurrency: a.Concurrency, PollInterval: 100 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	err = w.Run(ctx)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.spans, err
}

// RunChild is ChildCommand: a worker that runs until its stdin closes,
// then writes its sends to stdout, one JSON object a line.
func RunChild(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet(ChildCommand, flag.ContinueOnError)
	var a WorkerArgs
	fs.StringVar(&a.DB, "db", "", "")
	fs.StringVar(&a.Table, "table", "", "")
	fs.StringVar(&a.ID, "id", "", "")
	fs.IntVar(&a.Concurrency, "concurrency", 16, "")
	fs.DurationVar(&a.Latency, "latency", 0, "")
	fs.IntVar(&a.Rate.N, "rate", 0, "")
	fs.DurationVar(&a.Rate.Per, "per", 0, "")
	fs.IntVar(&a.Rate.Burst, "burst", 0, "")
	fs.IntVar(&a.Limit, "limit", 0, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _, _ = io.Copy(io.Discard, stdin); cancel() }()
	spans, err := RunWorker(ctx, a)
	enc := json.NewEncoder(stdout)
	for _, s := range spans {
		if err := enc.Encode(s); err != nil {
			return err
		}
	}
	return err
}

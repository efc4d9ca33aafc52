package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/mailspool/mailspool/config"
	"github.com/mailspool/mailspool/internal/bench"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/throttle/throttlebench"
	"github.com/mailspool/mailspool/transport"
)

func runBench(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "bench", "[--db URL] [--table T [--keep]] [--workers W] [--producers P] [--messages M] [--latency D] [--history H] [--processes] [--steady] [--algorithm mailspool|classic|both] [--priorities mix|interleave] [--repeat N] [--json]")
	var o bench.Options
	db := fs.String("db", "", "database URL to measure (default: a temporary SQLite file, removed at the end; $MAILSPOOL_DATABASE and the config's database are never used)")
	cfgPath := fs.String("config", "", "TOML config file whose lanes' tables the run refuses to use (default: $MAILSPOOL_CONFIG, ./mailspool.toml or "+config.SystemPath+", else the default lane's table, "+queue.DefaultTable+")")
	fs.IntVar(&o.Workers, "workers", 4, "workers draining the queue, each with its own connection pool")
	fs.IntVar(&o.Producers, "producers", 4, "producers enqueueing, each mail in its own transaction")
	fs.IntVar(&o.Messages, "messages", 20000, "mails of about 4 KB to enqueue and drain")
	fs.DurationVar(&o.Latency, "latency", 0, "how long each send takes (fake transport), or the round trip to the SMTP server (--smtp)")
	fs.IntVar(&o.History, "history", 0, "finished rows to pre-fill the table with (a kept --table that has exactly as many is reused)")
	fs.BoolVar(&o.Processes, "processes", false, "run each worker as a child process instead of a goroutine")
	fs.BoolVar(&o.Steady, "steady", false, "run the workers while the producers enqueue, so that they drain as the mail arrives, as in production; reports each mail's time from its commit to the end of its send (e2e_p50_ms, e2e_p99_ms)")
	fs.StringVar(&o.Algorithm, "algorithm", bench.Mailspool, "mailspool, classic (id-ordered UPDATE ... IN (SELECT ... LIMIT 20) claim, one ack per mail), or both in the same run")
	fs.IntVar(&o.Batch, "batch", 0, "worker batch (default: the worker's default)")
	fs.IntVar(&o.Concurrency, "concurrency", 0, "sends in flight per worker (default: the worker's default)")
	fs.DurationVar(&o.PollInterval, "poll", 0, "worker poll interval after a batch that was not full (default: the worker's default)")
	fs.BoolVar(&o.Limits, "limits", false, "enqueue with per-recipient and per-IP rate limits on (never reached), to measure their cost")
	fs.BoolVar(&o.SMTP, "smtp", false, "send through the SMTP adapter to an in-process SMTP server on loopback instead of the fake transport")
	fs.StringVar(&o.Table, "table", "", "lane table of the run (default: a fresh name, mailspool_bench_ and 8 hex digits); refused when a table of that name exists that bench did not create, or a lane uses it")
	fs.BoolVar(&o.Keep, "keep", false, "keep the run's tables (and its temporary SQLite file) at the end, e.g. to reuse a --history; the result line names them (table=, db=)")
	fs.Func("attachment-size", "give every mail an attachment of this size (e.g. 20MB, 512KiB): with --processes, a worker's peak memory (rss_mb) against the encoded size of its mails in flight (in_flight_mb)", func(s string) error {
		n, err := parseSize(s)
		o.AttachmentSize = n
		return err
	})
	fs.StringVar(&o.Priorities, "priorities", "", "enqueue mail with priorities instead of the default, to measure what they cost the claim: "+bench.PrioritiesMix+" (one mail in 20 at priority 9, the rest at the default) or "+bench.PrioritiesInterleave+" (priorities 0..9 in turn: the worst case for where a claim's rows lie)")
	fs.IntVar(&o.Repeat, "repeat", 1, "run the whole benchmark N times (the algorithms in turn within each run), then print each algorithm's median, least and greatest figures on a bench-summary line")
	fs.DurationVar(&o.Stall, "stall", bench.DefaultStall, "give up when no mail was delivered for this long; what is undelivered then is lost")
	asJSON := fs.Bool("json", false, "print the results as JSON (one object per line) instead of bench lines")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of this process (producers, goroutine workers, the SQLite engine) to this file, for go tool pprof")
	drainProfile := fs.String("drain-cpuprofile", "", "write a Go CPU profile of the first drain alone (goroutine workers, the SQLite engine; no producers) to this file")
	throttleRun := fs.Bool("throttle", false, "run the send-limit scenario instead (docs/THROTTLING.md): --workers processes x --concurrency (default 4 x 16) drain --messages mails (default 5000) to each of "+throttlebench.Limited+", limited to 10/s burst 1 and concurrency 3, and "+throttlebench.Unlimited+", unlimited, each send taking --latency (default 200ms); exits 1 when a limit is broken, the limited domain starves or the unlimited one drops below 95% of its rate without the limit")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *throttleRun {
		return runThrottleBench(ctx, e, fs, *db, *asJSON, *quiet)
	}
	if o.Repeat < 1 {
		return usageError{fmt.Sprintf("--repeat %d: want 1 or more runs", o.Repeat)}
	}
	// A zero would silently become bench's default, a huge count runs
	// the machine out of memory: both are usage errors.
	for _, n := range []struct {
		flag   string
		v, max int
	}{{"--workers", o.Workers, bench.MaxWorkers}, {"--producers", o.Producers, bench.MaxProducers}, {"--messages", o.Messages, bench.MaxMessages}} {
		if n.v < 1 || n.v > n.max {
			return usageError{fmt.Sprintf("%s %d: want 1 to %d", n.flag, n.v, n.max)}
		}
	}
	// Refused before anything is opened, as usage errors.
	for _, err := range []error{bench.CheckAlgorithm(o.Algorithm), bench.CheckPriorities(o.Priorities)} {
		if err != nil {
			return usageError{"--" + err.Error()}
		}
	}
	if o.Steady && *drainProfile != "" {
		return usageError{"--steady and --drain-cpuprofile: a steady run's drain runs beside its producers; use --cpuprofile"}
	}
	if *cpuProfile != "" && *drainProfile != "" {
		return usageError{"--cpuprofile and --drain-cpuprofile: a process has one CPU profile at a time; give one"}
	}
	// The config only says which tables are lanes'; bench measures the
	// database it is given, never the config's.
	cfg, err := (&storeFlags{config: *cfgPath}).load()
	if err != nil {
		return err
	}
	o.DB, o.Protect = *db, config.Tables(cfg.Lanes)
	if !*quiet {
		o.Progress = e.stderr
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	var profileErr error // starting the drain's profile failed
	if *drainProfile != "" {
		// Created now, so that a path that cannot be written fails before
		// the enqueue, not after it.
		f, err := os.Create(*drainProfile)
		if err != nil {
			return fmt.Errorf("bench: --drain-cpuprofile: %w", err)
		}
		defer f.Close()
		profiled := false
		o.OnDrain = func() func() {
			if profiled { // the first drain only
				return func() {}
			}
			profiled = true
			if err := pprof.StartCPUProfile(f); err != nil {
				profileErr = fmt.Errorf("bench: --drain-cpuprofile: %w", err)
				return func() {}
			}
			return pprof.StopCPUProfile
		}
	}
	results, err := bench.Run(ctx, o)
	err = errors.Join(err, profileErr)
	emit := func(v any, line string) error {
		if !*asJSON {
			_, werr := fmt.Fprintln(e.stdout, line)
			return werr
		}
		b, jerr := json.Marshal(v)
		if jerr != nil {
			return jerr
		}
		_, werr := fmt.Fprintln(e.stdout, string(b))
		return werr
	}
	for _, r := range results {
		if perr := emit(r, r.Line()); perr != nil {
			return perr
		}
	}
	if err != nil {
		return err
	}
	if o.Repeat > 1 {
		for _, s := range bench.Summarize(results) {
			if perr := emit(s, s.Line()); perr != nil {
				return perr
			}
		}
	}
	for _, r := range results {
		if r.Algorithm == bench.Mailspool {
			if err := r.Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// startCPUProfile starts writing a CPU profile to path; stop ends it.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("bench: --cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: --cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// runBenchWorker is the hidden worker process of "bench --processes".
func runBenchWorker(ctx context.Context, e *env, args []string) error {
	return bench.RunChild(ctx, args, os.Stdin, e.stdout, e.stderr)
}

// parseSize reads a byte count: a whole number with an optional unit, KB,
// MB (powers of 1000) or KiB, MiB (of 1024).
func parseSize(s string) (int, error) {
	units := []struct {
		suffix string
		n      int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"KB", 1000}, {"MB", 1000 * 1000}, {"B", 1}}
	mult := 1
	num := s
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.n
			break
		}
	}
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || n < 0 || n > transport.MaxEncodedSize/mult {
		return 0, fmt.Errorf("%q is not a size from 0 to 64MiB like 20MB or 512KiB", s)
	}
	return n * mult, nil
}

// runThrottleBench is bench --throttle.
func runThrottleBench(ctx context.Context, e *env, fs *flag.FlagSet, db string, asJSON, quiet bool) error {
	o := throttlebench.Options{DB: db, Processes: true}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	get := func(name string) int { n, _ := strconv.Atoi(fs.Lookup(name).Value.String()); return n }
	if set["workers"] {
		o.Workers = get("workers")
	}
	if set["concurrency"] {
		o.Concurrency = get("concurrency")
	}
	if set["messages"] {
		o.Messages = get("messages")
	}
	if set["latency"] {
		d, _ := time.ParseDuration(fs.Lookup("latency").Value.String())
		if d <= 0 {
			return usageError{"--latency: a send must take some time for the concurrency limit to mean anything"}
		}
		o.Latency = d
	}
	for _, n := range []struct {
		flag   string
		v, max int
	}{{"workers", o.Workers, 64}, {"concurrency", o.Concurrency, 1000}, {"messages", o.Messages, 1000000}} {
		if set[n.flag] && (n.v < 1 || n.v > n.max) {
			return usageError{fmt.Sprintf("--%s %d: want 1 to %d", n.flag, n.v, n.max)}
		}
	}
	if o.DB == "" {
		dir, err := os.MkdirTemp("", "mailspool-bench-throttle-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		o.DB = "sqlite:" + filepath.Join(dir, "bench.db")
	}
	if !quiet {
		o.Progress = e.stderr
	}
	r, err := throttlebench.Run(ctx, o)
	if err != nil {
		return fmt.Errorf("bench --throttle: %w", err)
	}
	if asJSON {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, string(b))
	} else {
		fmt.Fprintf(e.stdout, "bench-throttle workers=%d concurrency=%d messages=%d+%d latency=%v limit=%q,concurrency %d\n", r.Workers, r.Concurrency, r.Messages, r.Messages, r.Latency, r.Rate, r.Limit)
		fmt.Fprintf(e.stdout, "  %s: most in flight %d (limit %d), most started in one window %d, rate %.2f per window\n", throttlebench.Limited, r.MostInFlight, r.Limit, r.MostStartsPerSpan, r.LimitedRate)
		fmt.Fprintf(e.stdout, "  %s: %.1f/s with the limit, %.1f/s without: %.1f%% (%.1f/s with no %s mail at all: %.1f%%)\n", throttlebench.Unlimited,
			r.OtherRate, r.OtherBaseline, 100*r.OtherShare, r.OtherAlone, throttlebench.Limited, 100*r.OtherShareAlone)
		for _, v := range r.Violations {
			fmt.Fprintf(e.stdout, "  VIOLATION: %s\n", v)
		}
	}
	if len(r.Violations) > 0 {
		return fmt.Errorf("bench --throttle: %d violations", len(r.Violations))
	}
	return nil
}

// runThrottleBenchWorker is the hidden worker process of bench --throttle.
func runThrottleBenchWorker(ctx context.Context, e *env, args []string) error {
	return throttlebench.RunChild(ctx, args, os.Stdin, e.stdout)
}

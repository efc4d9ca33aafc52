package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/stdlib"
)

// Algorithms Options.Algorithm names.
const (
	Mailspool = "mailspool" // the queue package: queue.Enqueue, queue.Worker
	Classic   = "classic"   // the id-ordered UPDATE ... IN (SELECT ... LIMIT 20) claim, one ack per mail
	Both      = "both"      // Classic, then Mailspool, in the same run
)

// DefaultStall is the default Options.Stall.
const DefaultStall = 60 * time.Second

// Options describe one benchmark run. Zero fields take the defaults shown.
type Options struct {
	// DB is the database URL (package dburl); "" makes a temporary SQLite
	// file, removed at the end unless Keep. The run uses tables of its own
	// (Table, Table+"_classic", and their companions) and touches nothing
	// else: it marks each table it creates (a table comment on
	// MySQL/MariaDB, a trigger that never fires on SQLite), drops only
	// marked tables, and refuses to start when one of its table names is
	// taken by a table without the mark, by a lane migrated in the
	// database, or by a lane in Protect.
	DB string
	// Workers drain the queue (default 4), each with its own connection
	// pool; Producers enqueue (default 4), each mail in its own transaction.
	Workers, Producers int
	// Messages is how many mails of about 4 KB are enqueued and drained
	// (default 20 000).
	Messages int
	// Latency is how long every send takes (the fake transport's
	// latency), or with SMTP the round trip to the SMTP server: every
	// reply of the server reaches the adapter Latency after it was sent.
	Latency time.Duration
	// History pre-fills the table with this many finished (sent) rows of
	// the same size; a table that already holds exactly as many is reused.
	History int
	// Processes runs each worker as a child process (Executable
	// "bench-worker ..."), instead of a goroutine.
	Processes bool
	// Executable is the mailspool binary the children run (default: this
	// program).
	Executable string
	// Algorithm is Mailspool (default), Classic or Both.
	Algorithm string
	// Batch, Concurrency and PollInterval are the workers' options
	// (default: the queue.WorkerOptions defaults).
	Batch, Concurrency int
	PollInterval       time.Duration
	// Limits enqueues with the lane's rate limits on (per recipient and per
	// client IP, generous enough never to refuse), to measure their cost.
	Limits bool
	// SMTP sends through the SMTP adapter to an in-process SMTP server on
	// loopback instead of the fake transport, Latency away.
	SMTP bool
	// Steady runs the workers while the producers enqueue (started just
	// before them, without waiting for them to be ready), so that they
	// drain as the mail arrives, as in production, instead of after the
	// enqueue: the figures then include each mail's time from its commit
	// to the end of its first send (Result.E2EP50MS, E2EP99MS; a send's
	// Latency included), and the drain runs as fast as the enqueue. The
	// mailspool algorithm only, and without OnDrain.
	Steady bool
	// AttachmentSize gives every mail an attachment of this many bytes
	// (0: none), to measure what attachments cost a worker: its peak
	// resident memory (Result.RSSMB, with Processes) against the encoded
	// size of the mails in flight (Result.InFlightMB).
	AttachmentSize int
	// Priorities gives the mails priorities instead of the default, to
	// measure what priorities cost the claim (see PrioritiesMix and
	// PrioritiesInterleave); "" enqueues every mail at the default.
	Priorities string
	// Table is the lane table (default: a fresh name each run,
	// mailspool_bench_ and 8 hex digits). Names beginning mailspool_ are
	// refused, except mailspool_bench...
	Table string
	// Keep keeps the run's tables (and its temporary SQLite file) at the
	// end, for the next run's History; without it the run drops them, and
	// the shared tables of mailspool its migration created when they are
	// empty then: the database is left as it was found.
	Keep bool
	// Protect are lane tables (of a config) the run must never use.
	Protect []string
	// Stall ends the drain when no mail was delivered for this long
	// (default DefaultStall); the mails not delivered by then are lost.
	Stall time.Duration
	// Repeat runs the whole benchmark this many times (default 1), the
	// algorithms taking turns within each run, so that a figure can be
	// read as a median and a spread (Summarize) instead of one sample of a
	// noisy machine.
	Repeat int
	// Progress receives a progress line about every second (nil: none).
	Progress io.Writer
	// OnDrain, when set, is called as each drain of the mailspool
	// algorithm starts, after its enqueue; the function it returns is
	// called as the drain ends. It lets a caller profile the drain alone.
	OnDrain func() (end func())
}

// Bounds of a run: each worker and producer has a connection pool of its
// own (a worker run as a process, a whole process), and the run keeps a
// few numbers per message in memory.
const (
	MaxWorkers   = 256
	MaxProducers = 256
	MaxMessages  = 10_000_000
)

func (o *Options) setDefaults() error {
	if o.Workers == 0 {
		o.Workers = 4
	}
	if o.Producers == 0 {
		o.Producers = 4
	}
	if o.Messages == 0 {
		o.Messages = 20000
	}
	if o.Algorithm == "" {
		o.Algorithm = Mailspool
	}
	if o.Table == "" {
		o.Table = freshTable()
	}
	if o.Stall == 0 {
		o.Stall = DefaultStall
	}
	if o.Repeat == 0 {
		o.Repeat = 1
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if err := checkName(o.Table, o.Protect); err != nil {
		return err
	}
	for _, err := range []error{CheckAlgorithm(o.Algorithm), CheckPriorities(o.Priorities)} {
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	switch {
	case o.Workers < 1 || o.Producers < 1 || o.Messages < 1 || o.Repeat < 1:
		return fmt.Errorf("bench: workers (%d), producers (%d), messages (%d) and repeat (%d) must be at least 1", o.Workers, o.Producers, o.Messages, o.Repeat)
	case o.Workers > MaxWorkers || o.Producers > MaxProducers || o.Messages > MaxMessages:
		return fmt.Errorf("bench: at most %d workers, %d producers and %d messages (got %d, %d, %d)", MaxWorkers, MaxProducers, MaxMessages, o.Workers, o.Producers, o.Messages)
	case o.Latency < 0 || o.History < 0 || o.Stall < 0 || o.PollInterval < 0 || o.Batch < 0 || o.Concurrency < 0:
		return errors.New("bench: negative latency, history, stall, poll interval, batch or concurrency")
	case o.SMTP && o.Algorithm != Mailspool:
		return errors.New("bench: the SMTP run measures the mailspool algorithm only")
	case o.Steady && o.Algorithm != Mailspool:
		return errors.New("bench: the steady run measures the mailspool algorithm only")
	case o.Steady && o.OnDrain != nil:
		return errors.New("bench: a steady run's drain runs beside its producers: OnDrain cannot time it alone")
	case len(o.Table) > 40:
		return fmt.Errorf("bench: table name %q longer than 40 bytes", o.Table)
	}
	return nil
}

// CheckAlgorithm reports whether a is an algorithm Run knows
// (Options.Algorithm), saying which ones it knows when not.
func CheckAlgorithm(a string) error {
	switch a {
	case Mailspool, Classic, Both:
		return nil
	}
	return fmt.Errorf("algorithm %q: want %s, %s or %s", a, Mailspool, Classic, Both)
}

// CheckPriorities reports whether mode is a priority mode Run knows
// (Options.Priorities: "", PrioritiesMix or PrioritiesInterleave).
func CheckPriorities(mode string) error {
	switch mode {
	case "", PrioritiesMix, PrioritiesInterleave:
		return nil
	}
	return fmt.Errorf("priorities %q: want %s or %s", mode, PrioritiesMix, PrioritiesInterleave)
}

// Result is what one algorithm did in a run.
type Result struct {
	// Table is the run's lane table; DB its database when the run made
	// it (a temporary SQLite file, kept with Options.Keep).
	Table string `json:"table"`
	DB    string `json:"db,omitempty"`
	// Run is which run of a repeated benchmark (Options.Repeat) this is,
	// from 1; 0 when the benchmark ran once.
	Run          int     `json:"run,omitempty"`
	Store        string  `json:"store"` // "mysql", "postgres" or "sqlite"
	Algorithm    string  `json:"algorithm"`
	Transport    string  `json:"transport"` // "fake" or "smtp"
	Workers      int     `json:"workers"`
	Processes    bool    `json:"processes"`
	Producers    int     `json:"producers"`
	Messages     int     `json:"messages"`
	Latency      string  `json:"latency"`
	History      int     `json:"history"`
	EnqueuePerS  float64 `json:"enqueue_per_s"`
	DrainPerS    float64 `json:"drain_per_s"`
	Delivered    int     `json:"delivered"`  // deliveries, duplicates included
	Duplicates   int     `json:"duplicates"` // deliveries beyond the first of a mail
	Lost         int     `json:"lost"`       // mails never delivered
	Unrecorded   int     `json:"unrecorded"` // mails delivered whose row is not marked sent
	Deadlocks    int     `json:"deadlocks"`
	P50ClaimMS   float64 `json:"p50_claim_ms"`
	P99ClaimMS   float64 `json:"p99_claim_ms"`
	P99EnqueueMS float64 `json:"p99_enqueue_ms"`
	RSSMB        float64 `json:"rss_mb"` // peak resident memory of a worker process (goroutines: of this process during the drain)
	// InFlightMB is the encoded size of the mails one worker sends at
	// once (its concurrency, or the mails, if fewer), with AttachmentSize.
	InFlightMB float64 `json:"in_flight_mb,omitempty"`
	LogErrors  int     `json:"log_errors"`
	// RedoPerMailKB is the server's redo log written during the drain per
	// mail (MySQL/MariaDB only; on a shared server it includes the others'
	// writes).
	RedoPerMailKB float64 `json:"redo_per_mail_kb,omitempty"`
	// PagesPerMail is how many times the server's buffer pool was asked for
	// a page during the drain, per mail (MySQL/MariaDB only; on a shared
	// server it includes the others' reads): the database's work, counted
	// rather than timed, so it barely moves with the machine's load.
	PagesPerMail float64 `json:"pages_per_mail,omitempty"`
	// DiskReadsPerMail is how many of those pages the server had to read
	// from disk (Innodb_buffer_pool_reads), per mail: above zero, the
	// table outgrew the buffer pool and the drain measures the disk too.
	DiskReadsPerMail float64 `json:"disk_reads_per_mail,omitempty"`
	// WorkerCPUPerMailUS and DBCPUPerMailUS are the CPU time the workers
	// (this process and its children) and the database server (when it
	// runs on this machine; SQLite is in the workers) spent per mail during
	// the drain, in microseconds: on a shared machine they move much less
	// than mails per second.
	WorkerCPUPerMailUS float64 `json:"worker_cpu_us_per_mail"`
	DBCPUPerMailUS     float64 `json:"db_cpu_us_per_mail,omitempty"`
	// Steady: the workers drained while the producers enqueued
	// (Options.Steady). E2EP50MS and E2EP99MS are then the median and
	// 99th percentile of a mail's time from its enqueue's commit to the
	// end of its first send, and the per-mail CPU and page figures cover
	// the enqueue as well as the drain.
	Steady   bool    `json:"steady,omitempty"`
	E2EP50MS float64 `json:"e2e_p50_ms,omitempty"`
	E2EP99MS float64 `json:"e2e_p99_ms,omitempty"`
	// Priorities is Options.Priorities: how the mails' priorities were
	// given ("" when all were at the default).
	Priorities string `json:"priorities,omitempty"`
	// SMTPConnections is how many connections the SMTP server accepted
	// (SMTP runs only): the adapter reuses its connections across sends.
	SMTPConnections int `json:"smtp_connections,omitempty"`
}

// Line is the one-line summary: "bench store=mysql workers=4 ...".
func (r *Result) Line() string {
	f := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	ms := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	fields := []string{
		"store=" + r.Store, "algorithm=" + r.Algorithm, "transport=" + r.Transport,
		fmt.Sprintf("workers=%d", r.Workers), fmt.Sprintf("processes=%t", r.Processes),
		fmt.Sprintf("producers=%d", r.Producers), fmt.Sprintf("messages=%d", r.Messages),
		"latency=" + r.Latency, fmt.Sprintf("history=%d", r.History),
		"enqueue_per_s=" + f(r.EnqueuePerS), "drain_per_s=" + f(r.DrainPerS),
		fmt.Sprintf("duplicates=%d", r.Duplicates), fmt.Sprintf("lost=%d", r.Lost),
		fmt.Sprintf("unrecorded=%d", r.Unrecorded), fmt.Sprintf("deadlocks=%d", r.Deadlocks),
		"p50_claim_ms=" + ms(r.P50ClaimMS), "p99_claim_ms=" + ms(r.P99ClaimMS),
		"p99_enqueue_ms=" + ms(r.P99EnqueueMS), fmt.Sprintf("rss_mb=%.1f", r.RSSMB),
		fmt.Sprintf("in_flight_mb=%.1f", r.InFlightMB),
		fmt.Sprintf("log_errors=%d", r.LogErrors),
	}
	fields = append(fields, fmt.Sprintf("worker_cpu_us_per_mail=%.0f", r.WorkerCPUPerMailUS))
	if r.Store == "mysql" {
		fields = append(fields, fmt.Sprintf("db_cpu_us_per_mail=%.0f", r.DBCPUPerMailUS), fmt.Sprintf("redo_per_mail_kb=%.2f", r.RedoPerMailKB),
			fmt.Sprintf("pages_per_mail=%.1f", r.PagesPerMail), fmt.Sprintf("disk_reads_per_mail=%.2f", r.DiskReadsPerMail))
	}
	if r.Transport == "smtp" {
		fields = append(fields, fmt.Sprintf("smtp_connections=%d", r.SMTPConnections))
	}
	if r.Steady {
		fields = append(fields, "steady=true", "e2e_p50_ms="+ms(r.E2EP50MS), "e2e_p99_ms="+ms(r.E2EP99MS))
	}
	if r.Priorities != "" {
		fields = append(fields, "priorities="+r.Priorities)
	}
	fields = append(fields, "table="+r.Table)
	if r.DB != "" {
		fields = append(fields, "db="+r.DB)
	}
	if r.Run > 0 {
		fields = append(fields, fmt.Sprintf("run=%d", r.Run))
	}
	return "bench " + strings.Join(fields, " ")
}

// Err says why the run failed its correctness check: a mail lost, sent
// twice, or delivered without its row marked sent. nil when none.
func (r *Result) Err() error {
	if r.Lost == 0 && r.Duplicates == 0 && r.Unrecorded == 0 {
		return nil
	}
	return fmt.Errorf("bench: %s: %d lost, %d duplicates, %d delivered but not recorded as sent", r.Algorithm, r.Lost, r.Duplicates, r.Unrecorded)
}

// Run runs the benchmark and returns one Result per algorithm and run,
// in the order they ran: Classic first when both run, then the next run.
// Only the Mailspool results' Err is a failure of the queue; the classic
// baseline is expected to lose and duplicate mail under load, and its
// figures say how much.
//
// Without Options.Keep the run drops its tables at the end, whether it
// succeeded or not, and removes the SQLite file it made.
func Run(ctx context.Context, opts Options) (results []*Result, err error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	madeDB := ""
	if opts.DB == "" {
		url, remove, err := tempDB()
		if err != nil {
			return nil, err
		}
		if !opts.Keep {
			defer remove()
		}
		opts.DB, madeDB = url, url
	}
	admin, err := openDB(opts.DB, nil)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	if err := admin.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("bench: connecting: %w", err)
	}
	before, err := guard(ctx, admin, opts.Table)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, r := range results {
			r.Table = opts.Table
			if opts.Keep {
				r.DB = madeDB
			}
		}
		if opts.Keep {
			fmt.Fprintf(opts.Progress, "bench: kept table %s and its companions\n", opts.Table)
			return
		}
		// Even when the run was interrupted.
		cctx := context.WithoutCancel(ctx)
		err = errors.Join(err, dropOwn(cctx, admin, opts.Table), dropNewShared(cctx, admin, before))
	}()
	for run := 1; run <= opts.Repeat; run++ {
		if opts.Repeat > 1 {
			fmt.Fprintf(opts.Progress, "bench: run %d of %d\n", run, opts.Repeat)
		}
		if opts.Algorithm == Classic || opts.Algorithm == Both {
			r, err := runClassic(ctx, admin, &opts)
			if err != nil {
				return results, err
			}
			results = append(results, numbered(r, run, opts.Repeat))
		}
		if opts.Algorithm == Mailspool || opts.Algorithm == Both {
			r, err := runMailspool(ctx, admin, &opts)
			if err != nil {
				return results, err
			}
			results = append(results, numbered(r, run, opts.Repeat))
		}
	}
	return results, nil
}

// numbered sets r.Run when the benchmark runs more than once.
func numbered(r *Result, run, repeat int) *Result {
	if repeat > 1 {
		r.Run = run
	}
	return r
}

func newResult(db *sql.DB, o *Options, algorithm string) *Result {
	r := &Result{
		Store: storeName(db), Algorithm: algorithm, Transport: "fake",
		Workers: o.Workers, Processes: o.Processes, Producers: o.Producers,
		Messages: o.Messages, Latency: o.Latency.String(), History: o.History,
	}
	if o.SMTP {
		r.Transport = "smtp"
	}
	return r
}

func storeName(db *sql.DB) string {
	switch db.Driver().(type) {
	case *mysql.MySQLDriver:
		return "mysql"
	case *stdlib.Driver:
		return "postgres"
	}
	return "sqlite"
}

// serverCounters are three of the server's counters, read before and
// after a drain.
type serverCounters struct{ lsn, pageReads, diskReads int64 }

// readCounters reads the server's redo log sequence number, its buffer
// pool's page requests and the pages it read from disk (zero where the
// server does not report them, or for SQLite).
func readCounters(ctx context.Context, db *sql.DB) serverCounters {
	var c serverCounters
	if storeName(db) != "mysql" {
		return c
	}
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_lsn_current', 'Innodb_buffer_pool_read_requests', 'Innodb_buffer_pool_reads')")
	if err != nil {
		return c
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var v int64
		if rows.Scan(&name, &v) != nil {
			return serverCounters{}
		}
		switch strings.ToLower(name) {
		case "innodb_lsn_current":
			c.lsn = v
		case "innodb_buffer_pool_read_requests":
			c.pageReads = v
		case "innodb_buffer_pool_reads":
			c.diskReads = v
		}
	}
	return c
}

// perMail fills the redo and page figures of r from two readings.
func (r *Result) perMail(before, after serverCounters) {
	if before.lsn > 0 {
		r.RedoPerMailKB = float64(after.lsn-before.lsn) / 1024 / float64(r.Messages)
	}
	if before.pageReads > 0 {
		r.PagesPerMail = float64(after.pageReads-before.pageReads) / float64(r.Messages)
		r.DiskReadsPerMail = float64(after.diskReads-before.diskReads) / float64(r.Messages)
	}
}

// cpuPerMail fills the CPU figures of r from two readings.
func (r *Result) cpuPerMail(before, after cpuReading) {
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(r.Messages) }
	r.WorkerCPUPerMailUS = per(after.self - before.self)
	r.DBCPUPerMailUS = per(after.server - before.server)
}

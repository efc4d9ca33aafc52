package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/fake"
	"github.com/mailspool/mailspool/transport/smtp"
)

// bigLimit is a rate limit that is counted but never refuses in a run.
var bigLimit = queue.Limit{N: 1 << 30, Per: time.Hour}

func benchLane(o *Options) queue.Lane {
	l := queue.Lane{Table: o.Table, RecipientLimit: queue.NoLimit, IPLimit: queue.NoLimit}
	if o.AttachmentSize > 0 {
		l.MaxSize = transport.MaxEncodedSize
	}
	if o.Limits {
		l.RecipientLimit, l.IPLimit = bigLimit, bigLimit
	}
	return l
}

// drainStats is what the workers of a drain report.
type drainStats struct {
	claims    []time.Duration
	deadlocks int
	logErrors int
	rssMB     float64
}

func runMailspool(ctx context.Context, admin *sql.DB, o *Options) (*Result, error) {
	r := newResult(admin, o, Mailspool)
	r.Priorities = o.Priorities
	label := "mailspool"
	if err := prepareLane(ctx, admin, o); err != nil {
		return nil, err
	}
	producers, err := openDB(o.DB, nil)
	if err != nil {
		return nil, err
	}
	defer producers.Close()
	producers.SetMaxOpenConns(o.Producers)
	producers.SetMaxIdleConns(o.Producers)
	q, err := queue.New(ctx, producers, benchLane(o), nil)
	if err != nil {
		return nil, err
	}
	run := runID()
	tr := newTracker(messageIDs(run, o.Messages))
	file := attachmentData(o.AttachmentSize)
	if file != nil {
		m := message(run, 0)
		m.Attachments = []transport.Attachment{{Filename: "report.bin", Data: file}}
		r.InFlightMB = float64(min(o.Messages, max(1, o.concurrency()))*m.EncodedSize()) / (1 << 20)
	}
	var sink *smtpSink
	if o.SMTP {
		if sink, err = startSMTPSink(tr, o.Latency); err != nil {
			return nil, err
		}
		defer sink.close()
	}
	enqueue := func(ctx context.Context) error {
		var err error
		r.EnqueuePerS, r.P99EnqueueMS, err = produce(ctx, producers, o.Producers, o.Messages, o.Progress, label, tr.committed,
			func(ctx context.Context, tx *sql.Tx, i int) error {
				opts := []queue.Option{queue.Template(benchTemplate)}
				if o.Limits {
					opts = append(opts, queue.ClientIP(fmt.Sprintf("192.0.2.%d", i%250+1)))
				}
				if p, ok := priorityOf(o.Priorities, i); ok {
					opts = append(opts, queue.Priority(p))
				}
				m := message(run, i)
				if file != nil {
					m.Attachments = []transport.Attachment{{Filename: "report.bin", ContentType: "application/octet-stream", Data: file}}
				}
				_, err := q.Enqueue(ctx, tx, m, opts...)
				return err
			})
		if err == nil {
			fmt.Fprintf(o.Progress, "%s: enqueued %d mails, %.0f/s, p99 %.2f ms\n", label, o.Messages, r.EnqueuePerS, r.P99EnqueueMS)
		}
		return err
	}
	if !o.Steady {
		if err := enqueue(ctx); err != nil {
			return nil, err
		}
	}

	drain := func(ctx context.Context) (*drainStats, error) {
		if o.Processes {
			return drainProcesses(ctx, o, tr, sink, label)
		}
		return drainGoroutines(ctx, o, tr, sink, label)
	}
	var ds *drainStats
	counters := readCounters(ctx, admin)
	cpu := newCPUClock(ctx, admin)
	cpu0 := cpu.read()
	var endDrain func()
	if o.OnDrain != nil {
		endDrain = o.OnDrain()
	}
	start := time.Now()
	if o.Steady {
		ds, err = alongside(ctx, drain, enqueue)
		r.Steady = true
		e2e := tr.endToEnd()
		r.E2EP50MS, r.E2EP99MS = percentile(e2e, 50), percentile(e2e, 99)
	} else {
		ds, err = drain(ctx)
	}
	if endDrain != nil {
		endDrain()
	}
	if err != nil {
		return nil, err
	}
	finish(r, tr, start)
	r.cpuPerMail(cpu0, cpu.read())
	r.perMail(counters, readCounters(ctx, admin))
	r.Deadlocks, r.LogErrors, r.RSSMB = ds.deadlocks, ds.logErrors, ds.rssMB
	if sink != nil {
		r.SMTPConnections = sink.connections()
	}
	r.P50ClaimMS, r.P99ClaimMS = percentile(ds.claims, 50), percentile(ds.claims, 99)
	unsent, err := notSent(ctx, admin, o.Table)
	if err != nil {
		return nil, err
	}
	r.Unrecorded = max(0, unsent-r.Lost)
	return r, nil
}

// alongside runs drain and enqueue at the same time (a steady run): the
// drain starts first, without waiting for its workers to be ready, and
// either one failing stops the other.
func alongside(ctx context.Context, drain func(context.Context) (*drainStats, error), enqueue func(context.Context) error) (*drainStats, error) {
	dctx, stopDrain := context.WithCancel(ctx)
	defer stopDrain()
	ectx, stopEnqueue := context.WithCancel(ctx)
	defer stopEnqueue()
	type drained struct {
		ds  *drainStats
		err error
	}
	done := make(chan drained, 1)
	go func() {
		ds, err := drain(dctx)
		if err != nil {
			stopEnqueue()
		}
		done <- drained{ds, err}
	}()
	eerr := enqueue(ectx)
	if eerr != nil {
		stopDrain()
	}
	d := <-done
	if d.err != nil && errors.Is(eerr, context.Canceled) {
		eerr = nil // stopped because the drain failed: its error says why
	}
	return d.ds, errors.Join(eerr, d.err)
}

// finish fills the delivery figures of r from tr.
func finish(r *Result, tr *tracker, start time.Time) {
	distinct, delivered, foreign, _ := tr.counts()
	tr.mu.Lock()
	lastNew := tr.lastNew
	tr.mu.Unlock()
	r.Delivered = delivered
	r.Duplicates = delivered - distinct - foreign
	r.Lost = r.Messages - distinct
	if d := lastNew.Sub(start).Seconds(); d > 0 {
		r.DrainPerS = float64(distinct) / d
	}
}

// workerConfig is what one worker, goroutine or process, runs with.
type workerConfig struct {
	db, table, id      string
	batch, concurrency int
	poll, latency      time.Duration
	smtpURL            string // "" = the fake transport
}

func (o *Options) worker(i int, sink *smtpSink) workerConfig {
	c := workerConfig{db: o.DB, table: o.Table, id: fmt.Sprintf("bench-%d", i), batch: o.Batch,
		concurrency: o.Concurrency, poll: o.PollInterval, latency: o.Latency}
	if sink != nil {
		c.smtpURL = sink.url()
	}
	return c
}

// startWorker opens a worker as c says, delivering to deliver (fake
// transport only). The caller runs w.Run and then calls closeFn.
func startWorker(ctx context.Context, c workerConfig, p *probe, log *slog.Logger, deliver func(string)) (*queue.Worker, func(), error) {
	db, err := openDB(c.db, p)
	if err != nil {
		return nil, nil, err
	}
	q, err := queue.New(ctx, db, queue.Lane{Table: c.table, RecipientLimit: queue.NoLimit, IPLimit: queue.NoLimit}, nil)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	var tr transport.Transport
	if c.smtpURL != "" {
		tr, err = smtp.URLOpener{}.OpenTransportURL(ctx, mustParse(c.smtpURL))
		if err != nil {
			db.Close()
			return nil, nil, err
		}
	} else {
		tr = &trackingTransport{Transport: fake.New(&fake.Options{Latency: c.latency, Discard: true}), deliver: deliver}
	}
	w, err := queue.NewWorker(q, tr, &queue.WorkerOptions{
		ID: c.id, Batch: c.batch, Concurrency: c.concurrency, PollInterval: c.poll,
		CleanupInterval: -1, Logger: log,
	})
	if err != nil {
		tr.Close()
		db.Close()
		return nil, nil, err
	}
	return w, func() { tr.Close(); db.Close() }, nil
}

func drainGoroutines(ctx context.Context, o *Options, tr *tracker, sink *smtpSink, label string) (*drainStats, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var logErrors atomic.Int64
	log := slog.New(&countingHandler{n: &logErrors, out: o.Progress})
	probes := make([]*probe, o.Workers)
	runErrs := make([]error, o.Workers)
	var wg sync.WaitGroup
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	resetPeakRSS()
	for i := range o.Workers {
		probes[i] = &probe{}
		w, closeFn, err := startWorker(ctx, o.worker(i, sink), probes[i], log, tr.deliver)
		if err != nil {
			cancel()
			wg.Wait()
			return nil, err
		}
		closers = append(closers, closeFn)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Run(ctx); err != nil {
				runErrs[i] = fmt.Errorf("bench: worker %d: %w", i, err)
			}
		}()
	}
	tr.wait(ctx, o.Stall, o.Progress, label)
	cancel()
	wg.Wait()
	if err := errors.Join(runErrs...); err != nil {
		return nil, err
	}
	ds := &drainStats{logErrors: int(logErrors.Load()), rssMB: peakRSSMB()}
	for _, p := range probes {
		for _, site := range p.deadlockSites() {
			fmt.Fprintf(o.Progress, "%s: deadlock in %s\n", label, site)
		}
		txs, dl := p.take()
		ds.claims = append(ds.claims, txs...)
		ds.deadlocks += dl
	}
	return ds, nil
}

// trackingTransport reports every accepted send to deliver.
type trackingTransport struct {
	transport.Transport
	deliver func(messageID string)
}

func (t *trackingTransport) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	rc, err := t.Transport.Send(ctx, m)
	if err == nil {
		t.deliver(m.MessageID)
	}
	return rc, err
}

// countingHandler counts log records at warning level or above and prints
// the first few.
type countingHandler struct {
	n   *atomic.Int64
	out interface{ Write([]byte) (int, error) }
}

func (h *countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if n := h.n.Add(1); n <= 5 {
		line := r.Level.String() + " " + r.Message
		r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
		fmt.Fprintln(h.out, "worker log: "+line)
	}
	return nil
}

func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

// concurrency is the sends a worker has in flight at once.
func (o *Options) concurrency() int {
	if o.Concurrency > 0 {
		return o.Concurrency
	}
	return 8 // queue.WorkerOptions' default
}

// Priority modes of Options.Priorities.
const (
	// PrioritiesMix is transactional mail in a bulk lane: one mail in
	// twenty (a password reset, a receipt) at the highest priority, the
	// rest at the default. The urgent mail is claimed first, one row in
	// twenty of the table's.
	PrioritiesMix = "mix"
	// PrioritiesInterleave is the worst case for where the rows lie: mail
	// number i at priority i % 10, so that the rows of one priority, which
	// a claim takes together, lie one in ten in the table.
	PrioritiesInterleave = "interleave"
)

// priorityOf is mail i's priority under mode; false: the default.
func priorityOf(mode string, i int) (int, bool) {
	switch mode {
	case PrioritiesMix:
		if i%20 == 0 {
			return queue.MaxPriority, true
		}
	case PrioritiesInterleave:
		return i % 10, true
	}
	return 0, false
}

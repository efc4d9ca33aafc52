package bench

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ChildCommand is the hidden subcommand a worker process runs
// ("mailspool bench-worker ...", see RunChild).
const ChildCommand = "bench-worker"

// The lines a child writes on its standard output.
const (
	lineDelivered = "D" // D <Message-ID> <unix ns>: the fake transport accepted the mail at that time
	lineClaim     = "C" // C <nanoseconds>: one claim transaction
	lineEnd       = "E" // E <deadlocks> <log errors> <peak RSS MB>: the worker stopped
)

func (c workerConfig) args() []string {
	a := []string{ChildCommand, "--db", c.db, "--table", c.table, "--id", c.id,
		"--batch", strconv.Itoa(c.batch), "--concurrency", strconv.Itoa(c.concurrency),
		"--poll", c.poll.String(), "--latency", c.latency.String()}
	if c.smtpURL != "" {
		a = append(a, "--smtp", c.smtpURL)
	}
	return a
}

// RunChild is the worker process of a --processes run: it runs one worker
// as args say until stdin reaches its end (the parent closes it) or ctx
// ends, reporting deliveries, claim times and its totals on stdout.
// Worker log lines go to stderr.
func RunChild(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(ChildCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c workerConfig
	fs.StringVar(&c.db, "db", "", "database URL")
	fs.StringVar(&c.table, "table", "", "lane table")
	fs.StringVar(&c.id, "id", "", "worker id")
	fs.IntVar(&c.batch, "batch", 0, "claim batch")
	fs.IntVar(&c.concurrency, "concurrency", 0, "sends in flight")
	fs.DurationVar(&c.poll, "poll", 0, "poll interval")
	fs.DurationVar(&c.latency, "latency", 0, "fake transport latency")
	fs.StringVar(&c.smtpURL, "smtp", "", "SMTP URL instead of the fake transport")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.db == "" || c.table == "" || fs.NArg() > 0 {
		return errors.New("bench: bench-worker needs --db and --table and no arguments (it is started by mailspool bench --processes)")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
	}()

	out := &lineWriter{w: bufio.NewWriterSize(stdout, 64<<10)}
	stopFlush := out.flushEvery(100 * time.Millisecond)
	var logErrors atomic.Int64
	log := slog.New(&countingHandler{n: &logErrors, out: stderr})
	p := &probe{}
	w, closeFn, err := startWorker(ctx, c, p, log, func(id string) {
		out.line(lineDelivered + " " + id + " " + strconv.FormatInt(time.Now().UnixNano(), 10))
	})
	if err != nil {
		stopFlush()
		return err
	}
	runErr := w.Run(ctx)
	closeFn()
	for _, site := range p.deadlockSites() {
		fmt.Fprintf(stderr, "deadlock in %s\n", site)
	}
	txs, dl := p.take()
	for _, d := range txs {
		out.line(lineClaim + " " + strconv.FormatInt(int64(d), 10))
	}
	out.line(fmt.Sprintf("%s %d %d %.1f", lineEnd, dl, logErrors.Load(), peakRSSMB()))
	stopFlush()
	return errors.Join(runErr, out.flush())
}

// lineWriter writes lines from many goroutines to one buffered writer.
type lineWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (l *lineWriter) line(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.WriteString(s)
	_ = l.w.WriteByte('\n')
}

func (l *lineWriter) flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Flush()
}

// flushEvery flushes every d until the returned function is called.
func (l *lineWriter) flushEvery(d time.Duration) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				_ = l.flush()
			}
		}
	}()
	return func() { close(stop); <-done }
}

// drainProcesses runs o.Workers child processes and reads their reports.
func drainProcesses(ctx context.Context, o *Options, tr *tracker, sink *smtpSink, label string) (*drainStats, error) {
	exe := o.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("bench: finding this program for --processes: %w", err)
		}
	}
	type child struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		read  chan error
	}
	ds := &drainStats{}
	var mu sync.Mutex
	children := make([]*child, 0, o.Workers)
	stopAll := func() {
		for _, c := range children {
			_ = c.stdin.Close()
		}
	}
	var errs []error
	for i := range o.Workers {
		cmd := exec.CommandContext(ctx, exe, o.worker(i, sink).args()...)
		cmd.Stderr = prefixWriter{w: o.Progress, prefix: fmt.Sprintf("worker %d: ", i)}
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			stopAll()
			return nil, fmt.Errorf("bench: starting worker process %d: %w", i, err)
		}
		c := &child{cmd: cmd, stdin: stdin, read: make(chan error, 1)}
		children = append(children, c)
		go func() {
			sc := bufio.NewScanner(stdout)
			ended := false
			for sc.Scan() {
				kind, rest, _ := strings.Cut(sc.Text(), " ")
				switch kind {
				case lineDelivered:
					// Lines come in batches (flushEvery): the send's own
					// time, not the time the line arrived.
					id, at, _ := strings.Cut(rest, " ")
					ns, err := strconv.ParseInt(at, 10, 64)
					if err != nil {
						tr.deliver(id)
					} else {
						tr.deliverAt(id, time.Unix(0, ns))
					}
				case lineClaim:
					ns, _ := strconv.ParseInt(rest, 10, 64)
					mu.Lock()
					ds.claims = append(ds.claims, time.Duration(ns))
					mu.Unlock()
				case lineEnd:
					var dl, le int
					var rss float64
					_, _ = fmt.Sscan(rest, &dl, &le, &rss)
					mu.Lock()
					ds.deadlocks += dl
					ds.logErrors += le
					ds.rssMB = max(ds.rssMB, rss)
					mu.Unlock()
					ended = true
				}
			}
			if !ended {
				c.read <- errors.New("ended without its report")
				return
			}
			c.read <- sc.Err()
		}()
	}
	tr.wait(ctx, o.Stall, o.Progress, label)
	stopAll()
	for i, c := range children {
		rerr := <-c.read
		werr := c.cmd.Wait()
		if err := errors.Join(rerr, werr); err != nil {
			errs = append(errs, fmt.Errorf("bench: worker process %d: %w", i, err))
		}
	}
	return ds, errors.Join(errs...)
}

// prefixWriter writes each Write with a prefix (child stderr is line
// buffered by slog, one record per Write).
type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, p.prefix+string(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}

func mustParse(raw string) *url.URL {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	return u
}

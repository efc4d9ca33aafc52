// Package cli is the mailspool command as a library: cmd/mailspool is
// a few lines calling Main, and a program of another module builds its
// own mailspool binary with extra transport adapters by calling Main with
// Options.Transports (see docs/ADAPTERS.md and examples/httpadapter).
// Run "mailspool help" for the commands.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mailspool/mailspool/config"
	"github.com/mailspool/mailspool/internal/bench"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/throttle/throttlebench"
	"github.com/mailspool/mailspool/transport"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *env, args []string) error
}

var commands = []command{
	{"demo", "run the queue end to end on a throw-away SQLite file and the fake transport", runDemo},
	{"worker", "claim and send queued mail until stopped (SIGTERM) or --max-messages", runWorker},
	{"migrate", "create or upgrade the queue tables; 'migrate status', 'migrate --print-sql'", runMigrate},
	{"enqueue", "queue mail given by flags or a JSON file", runEnqueue},
	{"send-test", "send one test mail synchronously and print the outcome", runSendTest},
	{"list", "list mail newest first, by status, recipient, template, outcome or age", runList},
	{"show", "show one mail: status, attempts, last error, provider id; --full adds headers and body", runShow},
	{"retry", "give failed mail fresh attempts: by id, or every failed mail matching a filter", runRetry},
	{"cancel", "cancel pending or retrying mail by id (it fails as cancelled)", runCancel},
	{"pause", "stop every worker of a lane from claiming (enqueue goes on)", runPause},
	{"resume", "let a paused lane's workers claim again", runResume},
	{"suppress", "the suppression list: list, add, remove, import, export", runSuppress},
	{"serve", "receive the providers' webhooks (SES via SNS, SendGrid) and one-click unsubscribes on [serve] listen, and with --smtp the bounce mail sent to VERP return paths ([bounces])", runServe},
	{"classify", "explain how a reply is classified and which rule decides it", runClassify},
	{"stats", "print backlog, last hour's failure rate, stuck rows and pauses per lane", runStats},
	{"check", "one line and exit 0/1/2 (ok/warning/critical) for cron or Nagios", runCheck},
	{"cleanup", "delete old sent and failed rows now", runCleanup},
	{"bench", "measure enqueue and drain on a database, checking every mail is delivered once", runBench},
	{bench.ChildCommand, "", runBenchWorker},                 // hidden: a worker process of bench --processes
	{throttlebench.ChildCommand, "", runThrottleBenchWorker}, // hidden: a worker process of bench --throttle
	{"version", "print the version and VCS revision this binary was built from", runVersion},
}

// commandDeadline bounds the one-shot commands that read or change a few
// rows, so that a database that stops answering mid-statement fails them
// instead of hanging them. Connecting is bounded for every command
// (dburl.ConnectTimeout); check has its own --timeout; the worker gives up
// after its fail_after; migrate and cleanup may rightly run long.
var commandDeadline = map[string]time.Duration{
	"enqueue": 5 * time.Minute, "list": time.Minute, "show": time.Minute, "stats": time.Minute,
	"retry": 5 * time.Minute, "cancel": time.Minute, "pause": time.Minute, "resume": time.Minute,
}

// Exit codes; check has its own (0 ok, 1 warning, 2 critical, 3 unknown).
const (
	exitFailure     = 1 // any other error
	exitUsage       = 2 // bad flags or arguments
	exitNotFound    = 3 // no mail with that id (show, retry, cancel)
	exitRateLimited = 4 // enqueue refused by a rate limit: try again later
	exitPermanent   = 5 // send-test: the provider refused the mail for good
	exitSuppressed  = 6 // enqueue refused: the recipient is on the suppression list
)

const exitCodesHelp = `Exit codes:
  0  success
  1  failure (database, config, transport, a mail in the wrong state)
  2  usage error
  3  not found (show, retry, cancel: no mail with that id)
  4  rate-limited (enqueue: try again later)
  5  permanent failure (send-test: the provider refused the mail for good)
  6  suppressed (enqueue: the recipient is on the suppression list; the message names the reason)
  check exits 0 ok, 1 warning, 2 critical, 3 unknown.`

// env is what every command reads and writes.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	opts   Options
	// fs is the flag set the command made last (newFlagSet), for
	// wantsJSON.
	fs *flag.FlagSet
}

// Options extend the command.
type Options struct {
	// Transports opens the lanes' transport URLs, for worker, send-test
	// and every command that opens a transport. Nil means
	// config.Transports(): the adapters this module ships. A program
	// adding its own adapter registers it on config.Transports() and
	// passes the Mux here.
	Transports *transport.Mux
	// Stdin, Stdout and Stderr default to the process's.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// exitError ends a command with its own exit code.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// usageError is printed with the command's usage.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// Main runs one mailspool command line (args without the program name,
// as os.Args[1:]) and returns its exit code. It stops on SIGTERM and
// SIGINT as the mailspool command does; a program's main is
//
//	func main() { os.Exit(cli.Main(context.Background(), os.Args[1:], cli.Options{})) }
func Main(ctx context.Context, args []string, opts Options) int {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if opts.Stdin == nil {
		opts.Stdin = os.Stdin
	}
	if opts.Stdout == nil {
		opts.Stdout = os.Stdout
	}
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	return run(ctx, &env{stdin: opts.Stdin, stdout: opts.Stdout, stderr: opts.Stderr, opts: opts}, args)
}

// transports is the Mux the command opens transport URLs with.
func (e *env) transports() *transport.Mux {
	if e.opts.Transports != nil {
		return e.opts.Transports
	}
	return config.Transports()
}

// run executes one command line and returns the exit code.
func run(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(e.stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if d, ok := commandDeadline[c.name]; ok {
			cctx, cancel = context.WithTimeout(ctx, d)
		}
		out := &countingWriter{w: e.stdout}
		ce := &env{stdin: e.stdin, stdout: out, stderr: e.stderr, opts: e.opts}
		err := c.run(cctx, ce, args[1:])
		cancel()
		code := exitCode(err)
		var ue usageError
		var ee exitError
		switch {
		case err == nil || errors.Is(err, flag.ErrHelp):
			return 0
		case errors.As(err, &ee):
			if ee.err != nil {
				fmt.Fprintf(e.stderr, "mailspool %s: %v\n", c.name, ee.err)
			}
			// check prints its own JSON line.
			return code
		case errors.As(err, &ue):
			fmt.Fprintf(e.stderr, "mailspool %s: %v\nRun 'mailspool %s -h' for its flags.\n", c.name, err, c.name)
		default:
			fmt.Fprintf(e.stderr, "mailspool %s: %v\n", c.name, err)
		}
		if wantsJSON(ce.fs, args[1:]) && out.n == 0 {
			// A command that printed its result (retry, cancel: what was
			// done, and the mails left alone in the error) keeps it.
			writeJSONError(e.stdout, err, code)
		}
		return code
	}
	fmt.Fprintf(e.stderr, "mailspool: unknown command %q\n\n", args[0])
	usage(e.stderr)
	return exitUsage
}

// exitCode is the exit status a command's error maps to.
func exitCode(err error) int {
	var ue usageError
	var ee exitError
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		return exitUsage
	case errors.Is(err, queue.ErrNotFound):
		return exitNotFound
	case errors.Is(err, queue.ErrRateLimited):
		return exitRateLimited
	case errors.Is(err, queue.ErrSuppressed):
		return exitSuppressed
	}
	return exitFailure
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "mailspool — a mail queue in your own database.")
	fmt.Fprintln(w, "\nUsage: mailspool <command> [flags]\n\nCommands:")
	for _, c := range commands {
		if c.summary == "" {
			continue
		}
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nEvery command that touches the database takes --db URL and --config FILE. Without --db:")
	fmt.Fprintln(w, "$MAILSPOOL_DATABASE, else the config's database, else sqlite:mailspool.db in the working")
	fmt.Fprintln(w, "directory. Without --config: one lane \"default\" (table mail_queue) whose transport is")
	fmt.Fprintln(w, "$MAILSPOOL_LANE_DEFAULT_TRANSPORT; there is no default transport (fake:// only when written).")
	fmt.Fprintln(w, "Flags go before or after arguments. Read commands take --json.")
	fmt.Fprintln(w, "Run 'mailspool <command> -h' for a command's flags.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, exitCodesHelp)
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(e *env, name, args string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	e.fs = fs
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: mailspool %s %s\n\nFlags:\n", name, args)
		fs.PrintDefaults()
		fmt.Fprintf(e.stderr, "\n%s\n", exitCodesHelp)
	}
	return fs
}

// parseArgs parses flags that may come before, between or after
// positional arguments, and returns the positional ones, none of them
// empty.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		if fs.Arg(0) == "" {
			// An unset shell variable: an empty id, address or file
			// names nothing, and show took it for "any mail".
			return nil, usageError{fmt.Sprintf("argument %d is empty (an unset variable?)", len(pos)+1)}
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// parseFlags parses args and refuses positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", pos[0])}
	}
	return nil
}

// setExitCodes replaces the exit code table of fs's usage with table.
func setExitCodes(e *env, fs *flag.FlagSet, args, table string) {
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: mailspool %s %s\n\nFlags:\n", fs.Name(), args)
		fs.PrintDefaults()
		fmt.Fprintf(e.stderr, "\n%s\n", table)
	}
}

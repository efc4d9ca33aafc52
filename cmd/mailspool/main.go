// Command mailspool runs the mailspool worker daemon and its operator
// commands. Run "mailspool help" for the list.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/mailspool/mailspool/internal/bench"
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
	{"migrate", "create or upgrade the queue tables of every lane", runMigrate},
	{"enqueue", "queue mail given by flags or a JSON file", runEnqueue},
	{"send-test", "send one test mail synchronously and print the outcome", runSendTest},
	{"show", "show one mail: status, attempts, last error, provider message id", runShow},
	{"classify", "explain how a reply is classified and which rule decides it", runClassify},
	{"stats", "print backlog, last hour's failure rate and stuck rows per lane", runStats},
	{"cleanup", "delete old sent and failed rows now", runCleanup},
	{"bench", "measure enqueue and drain on a database, checking every mail is delivered once", runBench},
	{bench.ChildCommand, "", runBenchWorker}, // hidden: a worker process of bench --processes
}

// env is what every command writes to.
type env struct {
	stdout io.Writer
	stderr io.Writer
}

// usageError is printed with the command's usage.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, &env{stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:]))
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
		err := c.run(ctx, e, args[1:])
		var ue usageError
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.As(err, &ue):
			fmt.Fprintf(e.stderr, "mailspool %s: %v\nRun 'mailspool %s -h' for its flags.\n", c.name, err, c.name)
			return 2
		default:
			fmt.Fprintf(e.stderr, "mailspool %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(e.stderr, "mailspool: unknown command %q\n\n", args[0])
	usage(e.stderr)
	return 2
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
	fmt.Fprintln(w, "\nEvery command that touches the database takes --db URL and --config FILE;")
	fmt.Fprintln(w, "without them it uses sqlite:mailspool.db in the working directory and the fake transport.")
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(e *env, name, args string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: mailspool %s %s\n\nFlags:\n", name, args)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args and refuses positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}

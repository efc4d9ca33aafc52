package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mailspool/mailspool/internal/duration"
	"github.com/mailspool/mailspool/internal/termsafe"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/suppress"
)

const suppressUsage = `list|add|remove|import|export [flags]

  list   [--reason R] [--scope S] [--address A] [--since D] [--until T] [--expired] [--limit N] [--json]
  add    [--reason manual] [--scope all] [--expires D] [--source TEXT] ADDRESS...
  bypasses [--lane L] [--limit N] [--json]            (the mails enqueued with --bypass-suppression: who, why, past what)
  remove [--scope S] [--release] ADDRESS...           (every scope unless --scope; --release: the mail held for them is due at once)
  import [--format csv|json] [--reason R] [--scope S] FILE|-   a file of export's or a provider's export
  export [--format csv|json] [the filters of list] [--output FILE]`

func runSuppress(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usageError{"say what: mailspool suppress " + strings.SplitN(suppressUsage, "\n", 2)[0]}
	}
	sub := map[string]func(context.Context, *env, []string) error{
		"list": runSuppressList, "add": runSuppressAdd, "remove": runSuppressRemove, "bypasses": runSuppressBypasses,
		"import": runSuppressImport, "export": runSuppressExport,
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(e.stderr, "Usage: mailspool suppress %s\n\nRun 'mailspool suppress SUBCOMMAND -h' for its flags.\n\n%s\n", suppressUsage, exitCodesHelp)
		return nil
	}
	f, ok := sub[args[0]]
	if !ok {
		return usageError{fmt.Sprintf("unknown subcommand %q (want list, add, remove, import, export or bypasses)", args[0])}
	}
	return f(ctx, e, args[1:])
}

// openList loads the config and opens the suppression list.
func (f *storeFlags) openList() (*suppress.List, func(), error) {
	_, db, err := f.open()
	if err != nil {
		return nil, nil, err
	}
	l, err := suppress.Open(db)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return l, func() { db.Close() }, nil
}

// entryFilterFlags select entries for list and export.
type entryFilterFlags struct {
	reason, scope, address, since, until string
	expired                              bool
	limit                                int
}

func (f *entryFilterFlags) register(fs *flag.FlagSet) {
	filterVar(fs, &f.reason, "reason", "only entries of this reason: hard_bounce, complaint, unsubscribe, manual or invalid")
	filterVar(fs, &f.scope, "scope", "only entries of this scope: all, or a lane name")
	filterVar(fs, &f.address, "address", "only this address")
	filterVar(fs, &f.since, "since", "only entries made since then: a duration back from now (2h, 7d) or an RFC 3339 time")
	filterVar(fs, &f.until, "until", "only entries made before then: a duration back from now or an RFC 3339 time")
	fs.BoolVar(&f.expired, "expired", false, "include entries that have expired")
	fs.IntVar(&f.limit, "limit", 0, "at most this many, newest first (0: all)")
}

func (f *entryFilterFlags) filter(now time.Time) (suppress.Filter, error) {
	sf := suppress.Filter{Address: f.address, Scope: f.scope, Expired: f.expired, Limit: f.limit}
	if f.limit < 0 {
		return sf, usageError{fmt.Sprintf("--limit %d: want 0 or more", f.limit)}
	}
	if f.reason != "" {
		r, err := suppress.ParseReason(f.reason)
		if err != nil {
			return sf, usageError{"--reason: " + strings.TrimPrefix(err.Error(), "suppress: ")}
		}
		sf.Reason = r
	}
	if f.scope != "" {
		if err := suppress.CheckScope(f.scope); err != nil {
			return sf, usageError{"--scope: " + strings.TrimPrefix(err.Error(), "suppress: ")}
		}
	}
	var err error
	if f.since != "" {
		if sf.Since, err = parseSince(f.since, now); err != nil {
			return sf, usageError{err.Error()}
		}
	}
	if f.until != "" {
		if sf.Until, err = parseSince(f.until, now); err != nil {
			return sf, usageError{strings.Replace(err.Error(), "--since", "--until", 1)}
		}
	}
	return sf, nil
}

func runSuppressList(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "suppress list", "[--reason R] [--scope S] [--address A] [--since D] [--until T] [--expired] [--limit N] [--json]")
	var sf storeFlags
	sf.register(fs)
	var ff entryFilterFlags
	ff.register(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	filter, err := ff.filter(time.Now())
	if err != nil {
		return err
	}
	l, closeDB, err := sf.openList()
	if err != nil {
		return err
	}
	defer closeDB()
	es, err := l.Entries(ctx, filter)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, es)
	}
	if len(es) == 0 {
		fmt.Fprintln(e.stdout, "no suppressed addresses")
		return nil
	}
	fmt.Fprintf(e.stdout, "%-40s %-12s %-12s %-20s %-20s %s\n", "ADDRESS", "SCOPE", "REASON", "SINCE", "EXPIRES", "SOURCE")
	for _, x := range es {
		exp := "never"
		if !x.ExpiresAt.IsZero() {
			exp = x.ExpiresAt.UTC().Format(time.DateTime)
		}
		fmt.Fprintf(e.stdout, "%-40s %-12s %-12s %-20s %-20s %s\n", x.Address, x.Scope, x.Reason, x.CreatedAt.UTC().Format(time.DateTime), exp, x.Source)
	}
	return nil
}

func runSuppressAdd(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "suppress add", "[--reason manual] [--scope all] [--expires D] [--source TEXT] ADDRESS...")
	var sf storeFlags
	sf.register(fs)
	reason := fs.String("reason", string(suppress.Manual), "hard_bounce, complaint, unsubscribe, manual or invalid")
	scope := fs.String("scope", suppress.ScopeAll, "all, or the lane the entry applies to")
	expires := fs.String("expires", "", "the entry expires this long from now (90d); default: until removed")
	source := fs.String("source", "operator", "where the entry comes from, kept with it")
	addrs, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(addrs) == 0 {
		return usageError{"name at least one address"}
	}
	r, err := suppress.ParseReason(*reason)
	if err != nil {
		return usageError{"--reason: " + strings.TrimPrefix(err.Error(), "suppress: ")}
	}
	now := time.Now()
	var exp time.Time
	if *expires != "" {
		d, err := duration.Positive(*expires)
		if err != nil {
			return usageError{"--expires: " + err.Error()}
		}
		exp = now.Add(d)
	}
	es := make([]suppress.Entry, len(addrs))
	for i, a := range addrs {
		es[i] = suppress.Entry{Address: a, Scope: *scope, Reason: r, Source: *source, CreatedAt: now, ExpiresAt: exp}
	}
	l, closeDB, err := sf.openList()
	if err != nil {
		return err
	}
	defer closeDB()
	if err := l.AddAll(ctx, es); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "suppressed %d address(es) in scope %s: %s\n", len(es), es[0].Scope, r)
	return nil
}

func runSuppressRemove(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "suppress remove", "[--scope S] [--release] ADDRESS...")
	var sf storeFlags
	sf.register(fs)
	scope := filterString(fs, "scope", "only the entry of this scope (default: every scope)")
	release := fs.Bool("release", false, "in the same transaction, make the mail held for each address (lanes with suppression hold) due at once")
	addrs, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(addrs) == 0 {
		return usageError{"name at least one address"}
	}
	cfg, db, err := sf.open()
	if err != nil {
		return err
	}
	defer db.Close()
	l, err := suppress.Open(db)
	if err != nil {
		return err
	}
	var qs []*queue.Queue
	if *release {
		if qs, err = queues(ctx, db, cfg.Lanes, nil); err != nil {
			return err
		}
	}
	var missing []string
	for _, a := range addrs {
		var n, released int64
		if *release {
			n, released, err = l.RemoveAndRelease(ctx, a, *scope, qs)
		} else {
			n, err = l.Remove(ctx, a, *scope)
		}
		if err != nil {
			return err
		}
		if n == 0 {
			missing = append(missing, a)
			continue
		}
		fmt.Fprintf(e.stdout, "removed %s (%d entr%s)", a, n, map[bool]string{true: "y", false: "ies"}[n == 1])
		if *release {
			fmt.Fprintf(e.stdout, ", released %d held mail(s)", released)
		}
		fmt.Fprintln(e.stdout)
	}
	if len(missing) > 0 {
		return exitError{code: exitNotFound, err: fmt.Errorf("not suppressed: %s", strings.Join(missing, ", "))}
	}
	return nil
}

// formatOf reads --format, or guesses it from a file name.
func formatOf(flagValue, name string) (suppress.Format, error) {
	if flagValue == "" {
		if strings.HasSuffix(strings.ToLower(name), ".json") {
			return suppress.JSON, nil
		}
		return suppress.CSV, nil
	}
	f, err := suppress.ParseFormat(flagValue)
	if err != nil {
		return "", usageError{"--format: " + strings.TrimPrefix(err.Error(), "suppress: ")}
	}
	return f, nil
}

// maxImportFile bounds the file suppress import reads.
const maxImportFile = 256 << 20

func runSuppressImport(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "suppress import", "[--format csv|json] [--reason R] [--scope S] FILE|-")
	var sf storeFlags
	sf.register(fs)
	format := fs.String("format", "", "csv or json (default: from the file name; csv for -)")
	reason := fs.String("reason", string(suppress.Manual), "the reason of records whose reason mailspool does not know (a provider's bounce text)")
	scope := fs.String("scope", suppress.ScopeAll, "the scope of records without one")
	files, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(files) != 1 {
		return usageError{"name one file (or - for standard input)"}
	}
	f, err := formatOf(*format, files[0])
	if err != nil {
		return err
	}
	r, err := suppress.ParseReason(*reason)
	if err != nil {
		return usageError{"--reason: " + strings.TrimPrefix(err.Error(), "suppress: ")}
	}
	if err := suppress.CheckScope(*scope); err != nil {
		return usageError{"--scope: " + strings.TrimPrefix(err.Error(), "suppress: ")}
	}
	in := e.stdin
	name := "stdin"
	if files[0] != "-" {
		file, err := os.Open(files[0])
		if err != nil {
			return err
		}
		defer file.Close()
		in, name = file, files[0]
	}
	lr := &io.LimitedReader{R: in, N: maxImportFile + 1}
	es, err := suppress.Parse(lr, f, suppress.ParseOptions{Reason: r, Scope: *scope, Source: "import:" + name})
	if lr.N <= 0 {
		return fmt.Errorf("%s is larger than %d MiB", name, maxImportFile>>20)
	}
	if err != nil {
		return err
	}
	l, closeDB, err := sf.openList()
	if err != nil {
		return err
	}
	defer closeDB()
	if err := l.AddAll(ctx, es); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "imported %d entr%s from %s\n", len(es), map[bool]string{true: "y", false: "ies"}[len(es) == 1], name)
	return nil
}

func runSuppressExport(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "suppress export", "[--format csv|json] [--reason R] [--scope S] [--since D] [--expired] [--output FILE]")
	var sf storeFlags
	sf.register(fs)
	var ff entryFilterFlags
	ff.register(fs)
	format := fs.String("format", "", "csv or json (default: from --output's name; csv on standard output)")
	output := fs.String("output", "", "write to this file, which must not exist (default: standard output)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	f, err := formatOf(*format, *output)
	if err != nil {
		return err
	}
	filter, err := ff.filter(time.Now())
	if err != nil {
		return err
	}
	l, closeDB, err := sf.openList()
	if err != nil {
		return err
	}
	defer closeDB()
	es, err := l.Entries(ctx, filter)
	if err != nil {
		return err
	}
	if *output == "" {
		return suppress.Export(e.stdout, f, es)
	}
	file, err := os.OpenFile(*output, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := suppress.Export(file, f, es); err != nil {
		file.Close()
		return errors.Join(err, os.Remove(*output))
	}
	if err := file.Close(); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "exported %d entries to %s\n", len(es), *output)
	return nil
}

// runSuppressBypasses prints the audit trail of mails enqueued past the
// list (enqueue --bypass-suppression), newest first.
func runSuppressBypasses(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "suppress bypasses", "[--lane L] [--limit N] [--json]")
	var sf storeFlags
	sf.register(fs)
	lane := filterString(fs, "lane", "only this lane's")
	limit := fs.Int("limit", 100, "at most this many, newest first")
	asJSON := fs.Bool("json", false, "a JSON array")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageError{"suppress bypasses takes no arguments"}
	}
	if *limit < 1 || *limit > 10000 {
		return usageError{"--limit: between 1 and 10000"}
	}
	l, closeDB, err := sf.openList()
	if err != nil {
		return err
	}
	defer closeDB()
	bs, err := l.Bypasses(ctx, *lane, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, bs)
	}
	for _, b := range bs {
		past := "not suppressed then"
		if b.Reason != "" {
			past = "past " + string(b.Reason)
		}
		fmt.Fprintf(e.stdout, "%s %s/%d %s (%s): %s\n", b.At.Format(time.RFC3339), b.Lane, b.MailID, termsafe.Escape(b.Address), past, termsafe.Escape(b.Why))
	}
	return nil
}

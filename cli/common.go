package cli

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/mailspool/mailspool/config"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/transport"
)

// storeFlags are the flags of every command that touches the database.
type storeFlags struct {
	db     string
	config string
}

func (f *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.db, "db", "", "database URL: mysql://user:password@host:3306/dbname, postgres://user:password@host:5432/dbname or sqlite:path (default: $MAILSPOOL_DATABASE, else the config's database, else "+config.DefaultDatabase+")")
	fs.StringVar(&f.config, "config", "", "TOML config file with the lanes (default: $MAILSPOOL_CONFIG, else ./mailspool.toml, else "+config.SystemPath+"; without one: one lane \"default\", table mail_queue, transport from $MAILSPOOL_LANE_DEFAULT_TRANSPORT)")
}

// load loads the config: --config, else the file config.Find finds.
func (f *storeFlags) load() (*config.Config, error) {
	path := f.config
	if path == "" {
		var err error
		if path, _, err = config.Find(); err != nil {
			return nil, err
		}
	}
	return config.Load(path, f.db)
}

// source says which config file the flags lead to, for stats and -v.
func (f *storeFlags) source() string {
	if f.config != "" {
		return f.config + " (--config)"
	}
	path, from, err := config.Find()
	switch {
	case err != nil:
		return err.Error()
	case path == "":
		return "none (one lane \"default\")"
	}
	return path + " (" + from + ")"
}

// open loads the config and opens the database, which "mailspool migrate"
// must have made: a missing SQLite file is an error, not created.
func (f *storeFlags) open() (*config.Config, *sql.DB, error) {
	cfg, err := f.load()
	if err != nil {
		return nil, nil, err
	}
	db, err := dburl.OpenExisting(cfg.Database)
	if err != nil {
		return nil, nil, err
	}
	return cfg, db, nil
}

// create is open for migrate: it creates a missing SQLite file.
func (f *storeFlags) create() (*config.Config, *sql.DB, error) {
	cfg, err := f.load()
	if err != nil {
		return nil, nil, err
	}
	db, err := cfg.Open()
	if err != nil {
		return nil, nil, err
	}
	return cfg, db, nil
}

// laneFlags are storeFlags plus --lane and --json, for commands that work
// on one lane or all of them.
type laneFlags struct {
	storeFlags
	lane   string
	asJSON bool
}

func (f *laneFlags) register(fs *flag.FlagSet) {
	f.storeFlags.register(fs)
	filterVar(fs, &f.lane, "lane", "only this lane (default: every lane)")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON")
}

// registerOne is register for commands on one lane (openOne); laneHelp
// is --lane's help.
func (f *laneFlags) registerOne(fs *flag.FlagSet, laneHelp string) {
	f.storeFlags.register(fs)
	filterVar(fs, &f.lane, "lane", laneHelp)
	fs.BoolVar(&f.asJSON, "json", false, "print JSON")
}

// openQueues loads the config, opens the database and the Queue of each
// selected lane. The caller closes db.
func (f *laneFlags) openQueues(ctx context.Context) ([]config.Lane, []*queue.Queue, *sql.DB, error) {
	cfg, db, err := f.open()
	if err != nil {
		return nil, nil, nil, err
	}
	lanes, err := cfg.Pick(f.lane)
	if err == nil {
		var qs []*queue.Queue
		if qs, err = queues(ctx, db, lanes, nil); err == nil {
			return lanes, qs, db, nil
		}
	}
	db.Close()
	return nil, nil, nil, err
}

// queues opens the Queue of each lane.
func queues(ctx context.Context, db *sql.DB, lanes []config.Lane, opts *queue.Options) ([]*queue.Queue, error) {
	lanes = slices.Clone(lanes)
	if err := config.Screen(db, lanes); err != nil {
		return nil, err
	}
	qs := make([]*queue.Queue, len(lanes))
	for i, l := range lanes {
		if err := queue.CheckSchema(ctx, db, l.Lane.Table); err != nil {
			return nil, err
		}
		q, err := queue.New(ctx, db, l.Lane, opts)
		if err != nil {
			return nil, fmt.Errorf("lane %s: %w", l.Lane.Name, err)
		}
		qs[i] = q
	}
	return qs, nil
}

// openTransport opens a lane's transport; errors never show the URL's secrets.
// A composite (failover(...), roundrobin(...)) keeps its member health in
// this process only.
func (e *env) openTransport(ctx context.Context, lane, rawURL string) (transport.Transport, error) {
	return config.OpenTransport(ctx, e.transports(), nil, lane, rawURL, nil)
}

// writeJSON prints v as indented JSON, without HTML escaping (<, > and &
// stay as they are).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// openOne is openQueues for commands on a single lane: --lane, or the only
// lane of the config.
func (f *laneFlags) openOne(ctx context.Context) (config.Lane, *queue.Queue, *sql.DB, error) {
	lanes, qs, db, err := f.openQueues(ctx)
	if err != nil {
		return config.Lane{}, nil, nil, err
	}
	if len(qs) > 1 {
		db.Close()
		return config.Lane{}, nil, nil, usageError{fmt.Sprintf("the config has %d lanes: say which with --lane", len(qs))}
	}
	return lanes[0], qs[0], db, nil
}

// confirm asks question on stderr and reads the answer from stdin; only
// y or yes agrees.
func confirm(e *env, question string) bool {
	fmt.Fprintf(e.stderr, "%s [y/N] ", question)
	line, _ := bufio.NewReader(e.stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// refusedError reports the mails an action left alone, one per line, and
// keeps the queue's errors for the exit code.
func refusedError(err error) error {
	var lines []string
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			lines = append(lines, e.Error())
		}
	} else {
		lines = []string{err.Error()}
	}
	return joinedError{err: err, text: strings.Join(lines, "\n  ")}
}

// joinedError prints text and unwraps to err.
type joinedError struct {
	err  error
	text string
}

func (j joinedError) Error() string { return j.text }
func (j joinedError) Unwrap() error { return j.err }

// flagGiven reports whether the flag name was on the command line (even
// with an empty value).
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mailspool/mailspool/config"
	"github.com/mailspool/mailspool/inbound"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/suppress"
	"github.com/mailspool/mailspool/throttle"
	"github.com/mailspool/mailspool/transport/composite"
)

func runMigrate(ctx context.Context, e *env, args []string) error {
	if i := subcommand(args, "status"); i >= 0 {
		return runMigrateStatus(ctx, e, append(args[:i:i], args[i+1:]...))
	}
	fs := newFlagSet(e, "migrate", "[--db URL] [--config FILE] [--lane NAME] [--print-sql [--store mysql|postgres|sqlite] [--from N]] | status [--json]")
	var sf storeFlags
	sf.register(fs)
	lane := filterString(fs, "lane", "only this lane's table (default: every lane)")
	printSQL := fs.Bool("print-sql", false, "print the DDL instead of running it, for a schema tool of your own (goose, atlas, golang-migrate); connects to nothing")
	store := fs.String("store", "", "with --print-sql: mysql (MySQL and MariaDB), postgres or sqlite (default: the configured database's)")
	from := fs.Int("from", 0, "with --print-sql: the schema version the tables are at now (0: they do not exist)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if !*printSQL && (*store != "" || *from != 0) {
		return usageError{"--store and --from go with --print-sql"}
	}
	if *printSQL {
		return printMigrationSQL(e, sf, *lane, *store, *from)
	}
	cfg, db, err := sf.create()
	if err != nil {
		return err
	}
	defer db.Close()
	lanes, err := cfg.Pick(*lane)
	if err != nil {
		return err
	}
	if err := queue.Migrate(ctx, db, config.Tables(lanes)...); err != nil {
		return err
	}
	if err := suppress.Migrate(ctx, db); err != nil {
		return err
	}
	if err := inbound.Migrate(ctx, db); err != nil {
		return err
	}
	if err := composite.Migrate(ctx, db); err != nil {
		return err
	}
	if err := throttle.Migrate(ctx, db); err != nil {
		return err
	}
	for _, l := range lanes {
		fmt.Fprintf(e.stdout, "lane %s: table %s is at schema version %d\n", l.Lane.Name, l.Lane.Table, queue.SchemaVersion())
	}
	fmt.Fprintf(e.stdout, "suppression list: table %s; provider events: table %s; send limits: tables %s, %s; lane members: tables %s, %s\n", suppress.Table, inbound.Table, throttle.KeysTable, throttle.SlotsTable, composite.MembersTable, composite.PinsTable)
	return nil
}

func printMigrationSQL(e *env, sf storeFlags, lane, store string, from int) error {
	cfg, err := sf.load()
	if err != nil {
		return err
	}
	lanes, err := cfg.Pick(lane)
	if err != nil {
		return err
	}
	if store == "" {
		scheme, _, _ := strings.Cut(cfg.Database, ":")
		switch strings.ToLower(scheme) {
		case "mysql", "mariadb":
			store = "mysql"
		case "postgres", "postgresql":
			store = "postgres"
		default:
			store = "sqlite"
		}
	}
	for _, l := range lanes {
		stmts, err := queue.SchemaSQL(store, l.Lane.Table, from)
		if err != nil {
			return usageError{err.Error()}
		}
		fmt.Fprintf(e.stdout, "-- mailspool lane %s, table %s, %s: schema version %d to %d\n", l.Lane.Name, l.Lane.Table, store, from, queue.SchemaVersion())
		for _, s := range stmts {
			fmt.Fprintf(e.stdout, "%s;\n\n", s)
		}
	}
	stmts, err := suppress.SchemaSQL(store)
	if err != nil {
		return usageError{err.Error()}
	}
	events, err := inbound.SchemaSQL(store)
	if err != nil {
		return usageError{err.Error()}
	}
	limits, err := throttle.SchemaSQL(store)
	if err != nil {
		return usageError{err.Error()}
	}
	members, err := composite.SchemaSQL(store)
	if err != nil {
		return usageError{err.Error()}
	}
	fmt.Fprintf(e.stdout, "-- mailspool suppression list, provider events, send limits and lane members, %s\n", store)
	for _, s := range append(append(append(stmts, events...), limits...), members...) {
		fmt.Fprintf(e.stdout, "%s;\n\n", s)
	}
	return nil
}

// tableStatus is one lane's entry of "mailspool migrate status --json".
type tableStatus struct {
	Lane    string `json:"lane"`
	Table   string `json:"table"`
	Version int    `json:"version"`
	Want    int    `json:"want"`
}

func runMigrateStatus(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "migrate status", "[--db URL] [--config FILE] [--lane NAME] [--json]")
	var lf laneFlags
	lf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	// A read: an SQLite file that does not exist is reported as never
	// migrated, not created.
	cfg, db, err := lf.open()
	noFile := errors.Is(err, dburl.ErrNoFile)
	if err != nil && !noFile {
		return err
	}
	if db != nil {
		defer db.Close()
	}
	if noFile {
		if cfg, err = lf.load(); err != nil {
			return err
		}
	}
	lanes, err := cfg.Pick(lf.lane)
	if err != nil {
		return err
	}
	var out []tableStatus
	behind := 0
	for _, l := range lanes {
		v := 0
		if !noFile {
			if v, err = queue.TableVersion(ctx, db, l.Lane.Table); err != nil {
				return fmt.Errorf("lane %s: %w", l.Lane.Name, err)
			}
		}
		out = append(out, tableStatus{Lane: l.Lane.Name, Table: l.Lane.Table, Version: v, Want: queue.SchemaVersion()})
		if v != queue.SchemaVersion() {
			behind++
		}
	}
	if lf.asJSON {
		if err := writeJSON(e.stdout, out); err != nil {
			return err
		}
	} else {
		for _, s := range out {
			state := "up to date"
			switch {
			case s.Version == 0:
				state = "not created: run 'mailspool migrate'"
			case s.Version < s.Want:
				state = "behind: run 'mailspool migrate'"
			case s.Version > s.Want:
				state = "newer than this program: upgrade mailspool"
			}
			fmt.Fprintf(e.stdout, "lane %s: table %s at schema version %d of %d, %s\n", s.Lane, s.Table, s.Version, s.Want, state)
		}
	}
	if behind > 0 {
		return exitError{code: exitFailure}
	}
	return nil
}

// valueFlags are migrate's flags that take a value as the next argument.
var valueFlags = map[string]bool{"db": true, "config": true, "lane": true, "store": true, "from": true}

// subcommand returns the index of the argument name when it stands as a
// positional argument among flags (migrate --config x status), else -1.
func subcommand(args []string, name string) int {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return -1
		}
		if strings.HasPrefix(a, "-") {
			flagName := strings.TrimLeft(a, "-")
			if !strings.Contains(flagName, "=") && valueFlags[flagName] {
				i++ // its value
			}
			continue
		}
		if a == name {
			return i
		}
	}
	return -1
}

package bench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mailspool/mailspool/internal/placeholder"
)

// A run drops only tables it created. It marks each table as it creates
// it: on MySQL/MariaDB and PostgreSQL with the table comment ownMark, on SQLite with a
// trigger that never fires, named ownTrigger(table). Both marks belong to
// the table itself and go with it: a table dropped and re-created by
// anyone else (a lane by "mailspool migrate", an application's table) has
// no mark, and a run refuses to use it.

// ownMark is the table comment of a run's tables on MySQL/MariaDB.
const ownMark = "mailspool bench: created by mailspool bench, which may drop it"

// ownTrigger names the trigger that marks table as a run's on SQLite.
func ownTrigger(table string) string { return "mailspool_bench_mark_" + table }

// ownTables are every table a run whose lane table is t may create.
func ownTables(t string) []string {
	return []string{t, t + "_limits", t + "_bodies", t + "_files", t + "_seed", t + "_classic"}
}

// laneCompanions are the tables of a lane whose table is t.
func laneCompanions(t string) []string {
	return []string{t, t + "_limits", t + "_bodies", t + "_files"}
}

// freshTable is the lane table of a run that names none: a new name each
// run, so that no run meets another's tables (or anyone else's).
func freshTable() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "mailspool_bench_" + hex.EncodeToString(b[:])
}

// tempDB makes the SQLite file of a run that names no database, in a
// directory of its own that remove deletes with the file's journal.
func tempDB() (url string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "mailspool-bench-")
	if err != nil {
		return "", nil, fmt.Errorf("bench: a temporary SQLite file: %w", err)
	}
	return "sqlite:" + filepath.Join(dir, "bench.db"), func() { os.RemoveAll(dir) }, nil
}

// checkName refuses a lane table that is no name for a run's tables:
// invalid, mailspool's own (mailspool_schema, mailspool_lanes and every
// other name beginning mailspool_, except mailspool_bench...), or a
// table of one of the lanes in protect.
func checkName(t string, protect []string) error {
	if !tableName.MatchString(t) {
		return fmt.Errorf("bench: invalid table name %q (letters, digits and _, not starting with a digit)", t)
	}
	lower := strings.ToLower(t)
	if strings.HasPrefix(lower, "mailspool_") && !strings.HasPrefix(lower, "mailspool_bench") {
		return fmt.Errorf("bench: --table %s: names beginning mailspool_ are mailspool's own tables (mailspool_schema, mailspool_lanes, ...); bench never touches them", t)
	}
	for _, lane := range protect {
		if err := collides(t, lane, "a lane of the config"); err != nil {
			return err
		}
	}
	return nil
}

// collides refuses a run's tables (lane table t) if one of them is one of
// the tables of the lane whose table is lane (names compared without
// case, as SQLite does).
func collides(t, lane, what string) error {
	for _, own := range ownTables(t) {
		for _, theirs := range laneCompanions(lane) {
			if strings.EqualFold(own, theirs) {
				return fmt.Errorf("bench: --table %s: its table %s is a table of %s (lane table %s); bench never touches a lane's tables: choose another --table, or leave it out for a fresh one", t, own, what, lane)
			}
		}
	}
	return nil
}

// guard refuses a run on lane table t unless every table it may create
// either does not exist or carries the mark, and none of them belongs to
// a lane registered in the database (mailspool_schema) that is not a
// run's own. It returns the tables that exist now, for cleanup.
func guard(ctx context.Context, db *sql.DB, t string) (before map[string]bool, err error) {
	before, err = listTables(ctx, db)
	if err != nil {
		return nil, err
	}
	for _, own := range ownTables(t) {
		name, ok := find(before, own)
		if !ok {
			continue
		}
		marked, err := isMarked(ctx, db, name)
		if err != nil {
			return nil, err
		}
		if !marked {
			return nil, fmt.Errorf("bench: table %s exists and was not created by mailspool bench; bench drops only tables it created: choose another --table, or leave it out for a fresh one", name)
		}
	}
	if _, ok := find(before, "mailspool_schema"); ok {
		lanes, err := registeredLanes(ctx, db)
		if err != nil {
			return nil, err
		}
		for _, lane := range lanes {
			if name, ok := find(before, lane); ok {
				if marked, err := isMarked(ctx, db, name); err != nil {
					return nil, err
				} else if marked {
					continue // an earlier run's, kept
				}
			}
			if err := collides(t, lane, "a lane migrated in this database"); err != nil {
				return nil, err
			}
		}
	}
	return before, nil
}

// registeredLanes are the lane tables mailspool_schema records.
func registeredLanes(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT tbl FROM mailspool_schema`)
	if err != nil {
		return nil, fmt.Errorf("bench: reading mailspool_schema: %w", err)
	}
	defer rows.Close()
	var lanes []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			return nil, err
		}
		lanes = append(lanes, l)
	}
	return lanes, rows.Err()
}

// listTables returns the tables and views of the database, by name
// (SQLite's own, such as sqlite_sequence, left out).
func listTables(ctx context.Context, db *sql.DB) (map[string]bool, error) {
	q := `SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\_%' ESCAPE '\'`
	switch storeName(db) {
	case "mysql":
		q = `SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()`
	case "postgres":
		q = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()`
	}
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("bench: listing the tables: %w", err)
	}
	defer rows.Close()
	tables := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		tables[name] = true
	}
	return tables, rows.Err()
}

// find looks name up in tables without case, and returns it as stored.
func find(tables map[string]bool, name string) (string, bool) {
	if tables[name] {
		return name, true
	}
	for t := range tables {
		if strings.EqualFold(t, name) {
			return t, true
		}
	}
	return "", false
}

// isMarked reports whether table carries a run's mark.
func isMarked(ctx context.Context, db *sql.DB, table string) (bool, error) {
	var n int
	var err error
	switch storeName(db) {
	case "mysql":
		err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables
  WHERE table_schema = DATABASE() AND table_name = ? AND table_type = 'BASE TABLE' AND table_comment = ?`, table, ownMark).Scan(&n)
	case "postgres":
		err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
  WHERE s.nspname = current_schema() AND c.relname = $1 AND c.relkind = 'r' AND obj_description(c.oid, 'pg_class') = $2`, table, ownMark).Scan(&n)
	default:
		err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master
  WHERE type = 'trigger' AND name = ? AND lower(tbl_name) = lower(?)`, ownTrigger(table), table).Scan(&n)
	}
	if err != nil {
		return false, fmt.Errorf("bench: reading the mark of %s: %w", table, err)
	}
	return n > 0, nil
}

// mark marks table, which the run has just created, as its own.
func mark(ctx context.Context, db *sql.DB, table string) error {
	stmt := `ALTER TABLE ` + table + ` COMMENT = '` + ownMark + `'`
	switch storeName(db) {
	case "mysql":
	case "postgres":
		stmt = `COMMENT ON TABLE ` + table + ` IS '` + ownMark + `'`
	default:
		stmt = `CREATE TRIGGER IF NOT EXISTS "` + ownTrigger(table) + `" BEFORE DELETE ON ` + table + ` WHEN 0 BEGIN SELECT 1; END`
	}
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		return fmt.Errorf("bench: marking %s as the run's own: %w", table, err)
	}
	return nil
}

// dropOwn drops the tables of lane table t that carry the mark, and
// forgets the lane in mailspool_schema and mailspool_lanes.
func dropOwn(ctx context.Context, db *sql.DB, t string) error {
	now, err := listTables(ctx, db)
	if err != nil {
		return err
	}
	var errs []error
	for _, own := range ownTables(t) {
		name, ok := find(now, own)
		if !ok {
			continue
		}
		marked, err := isMarked(ctx, db, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !marked {
			continue
		}
		if _, err := db.ExecContext(ctx, `DROP TABLE `+name); err != nil {
			errs = append(errs, fmt.Errorf("bench: dropping %s: %w", name, err))
		}
	}
	for _, shared := range []string{"mailspool_schema", "mailspool_lanes"} {
		if _, ok := find(now, shared); ok {
			if _, err := db.ExecContext(ctx, placeholder.For(db, `DELETE FROM `+shared+` WHERE tbl = ?`), t); err != nil {
				errs = append(errs, fmt.Errorf("bench: forgetting %s in %s: %w", t, shared, err))
			}
		}
	}
	return errors.Join(errs...)
}

// dropNewShared drops mailspool's shared tables (mailspool_schema,
// mailspool_lanes, ...) that the run's migration created, when they are
// empty once the run's tables are gone: a database that had none keeps
// none. A shared table that was there before, or holds anyone's rows, stays.
func dropNewShared(ctx context.Context, db *sql.DB, before map[string]bool) error {
	now, err := listTables(ctx, db)
	if err != nil {
		return err
	}
	var errs []error
	for name := range now {
		lower := strings.ToLower(name)
		if before[name] || !strings.HasPrefix(lower, "mailspool_") || strings.HasPrefix(lower, "mailspool_bench") {
			continue
		}
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+name).Scan(&n); err != nil {
			errs = append(errs, fmt.Errorf("bench: counting the rows of %s: %w", name, err))
			continue
		}
		if n > 0 {
			continue
		}
		if _, err := db.ExecContext(ctx, `DROP TABLE `+name); err != nil {
			errs = append(errs, fmt.Errorf("bench: dropping %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

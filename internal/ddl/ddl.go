// Package ddl runs mailspool's schema steps so that an interrupted or
// failed migration never leaves a half-made schema behind, and never takes
// an object that is not mailspool's for its own.
//
//   - On PostgreSQL and SQLite, where DDL is transactional, a step's
//     statements and the record of its version run in one transaction:
//     the step is done or not at all, whatever stops it (an error, a
//     killed connection, a killed process).
//   - On MySQL and MariaDB every DDL statement commits by itself. A step's
//     statements are each written to be safe to run again (CREATE ... IF
//     NOT EXISTS, an ADD COLUMN that finds its column counts as done, a
//     DROP IF EXISTS before a CREATE), and its version is recorded after
//     the last one: a step cut short is re-run whole by the next migrate.
//   - On every store, before any DDL, Conflicts looks at each table a
//     CREATE TABLE IF NOT EXISTS would skip and each index a CREATE INDEX
//     IF NOT EXISTS would skip: a table with columns mailspool never gave
//     it, or lacking the ones the statement declares, or an index of that
//     name on another table, is someone else's object, and the migration
//     stops there with an error naming it, having changed nothing.
package ddl

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/mailspool/mailspool/internal/sqlstore"
)

var (
	createTable = regexp.MustCompile("(?is)^\\s*CREATE\\s+TABLE\\s+(IF\\s+NOT\\s+EXISTS\\s+)?([`\"]?[A-Za-z0-9_]+[`\"]?)\\s*\\((.*)\\)[^)]*$")
	createIndex = regexp.MustCompile("(?is)^\\s*CREATE\\s+(?:UNIQUE\\s+)?INDEX\\s+IF\\s+NOT\\s+EXISTS\\s+([`\"]?[A-Za-z0-9_]+[`\"]?)\\s+ON\\s+([`\"]?[A-Za-z0-9_]+[`\"]?)")
	alterTable  = regexp.MustCompile("(?is)^\\s*ALTER\\s+TABLE\\s+([`\"]?[A-Za-z0-9_]+[`\"]?)\\s")
	addColumn   = regexp.MustCompile("(?i)ADD\\s+COLUMN\\s+(?:IF\\s+NOT\\s+EXISTS\\s+)?([`\"]?[A-Za-z0-9_]+[`\"]?)")
	columnLine  = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)\s`)
)

// definitions splits the body of a CREATE TABLE at its top-level commas,
// skipping those in parentheses and in quoted comments and defaults.
func definitions(body string) []string {
	var out []string
	depth, quoted, start := 0, false, 0
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case c == '\'':
			quoted = !quoted
		case quoted:
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == ',' && depth == 0:
			out = append(out, body[start:i])
			start = i + 1
		}
	}
	return append(out, body[start:])
}

var ()

// keywords that start a line of a CREATE TABLE body that is not a column.
var notColumn = []string{"primary", "unique", "key", "index", "constraint", "foreign", "check"}

func unquote(s string) string { return strings.ToLower(strings.Trim(s, "`\"")) }

// Columns returns, for each table the statements create or add columns
// to, the columns they give it (lower case, in order of appearance).
// Only mailspool's own DDL is read: CREATE TABLE, ALTER TABLE ... ADD
// COLUMN.
func Columns(stmts []string) map[string][]string {
	out := map[string][]string{}
	add := func(table, col string) {
		if !slices.Contains(out[table], col) {
			out[table] = append(out[table], col)
		}
	}
	for _, s := range stmts {
		if m := createTable.FindStringSubmatch(s); m != nil {
			table := unquote(m[2])
			if _, ok := out[table]; !ok {
				out[table] = nil
			}
			for _, def := range definitions(m[3]) {
				c := columnLine.FindStringSubmatch(def)
				if c == nil || slices.Contains(notColumn, strings.ToLower(c[1])) {
					continue
				}
				add(table, strings.ToLower(c[1]))
			}
			continue
		}
		if m := alterTable.FindStringSubmatch(s); m != nil {
			for _, c := range addColumn.FindAllStringSubmatch(s, -1) {
				add(unquote(m[1]), unquote(c[1]))
			}
		}
	}
	return out
}

// TableColumns returns table's columns (lower case), nil when there is no
// such table.
func TableColumns(ctx context.Context, db *sql.DB, store sqlstore.Name, table string) ([]string, error) {
	q := `SELECT column_name FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ?`
	switch store {
	case sqlstore.SQLite:
		q = `SELECT name FROM pragma_table_info(?)`
	case sqlstore.Postgres:
		q = `SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1`
	}
	rows, err := db.QueryContext(ctx, q, table)
	if err != nil {
		return nil, fmt.Errorf("reading the columns of %s: %w", table, err)
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, fmt.Errorf("reading the columns of %s: %w", table, err)
		}
		cols = append(cols, strings.ToLower(c))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the columns of %s: %w", table, err)
	}
	return cols, nil
}

// indexTable returns the table an index of that name is on ("" when there
// is none). Only SQLite and PostgreSQL name indexes database-wide; MySQL's
// belong to their table and never conflict.
func indexTable(ctx context.Context, db *sql.DB, store sqlstore.Name, index string) (string, error) {
	var q string
	switch store {
	case sqlstore.SQLite:
		q = `SELECT tbl_name FROM sqlite_master WHERE type = 'index' AND name = ?`
	case sqlstore.Postgres:
		q = `SELECT tablename FROM pg_indexes WHERE schemaname = current_schema() AND indexname = $1`
	default:
		return "", nil
	}
	var t string
	err := db.QueryRowContext(ctx, q, index).Scan(&t)
	if err == sql.ErrNoRows {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("looking for index %s: %w", index, err)
	}
	return strings.ToLower(t), nil
}

// Conflicts checks, before any of stmts runs, that every table a CREATE
// TABLE IF NOT EXISTS among them would find already there is one
// mailspool made (by an earlier, perhaps interrupted, run): it has every
// column the statement declares, and no column outside allowed[table]
// (every column any step gives that table; when absent, the statement's
// own). And that every index a CREATE INDEX IF NOT EXISTS would find is on
// the table the statement names. The error names the object and says
// what to do.
func Conflicts(ctx context.Context, db *sql.DB, store sqlstore.Name, stmts []string, allowed map[string][]string) error {
	for _, s := range stmts {
		if m := createTable.FindStringSubmatch(s); m != nil && m[1] != "" {
			table := unquote(m[2])
			have, err := TableColumns(ctx, db, store, table)
			if err != nil {
				return err
			}
			if have == nil {
				continue
			}
			want := Columns([]string{s})[table]
			ok := allowed[table]
			if ok == nil {
				ok = want
			}
			var missing, foreign []string
			for _, c := range want {
				if !slices.Contains(have, c) {
					missing = append(missing, c)
				}
			}
			for _, c := range have {
				if !slices.Contains(ok, c) {
					foreign = append(foreign, c)
				}
			}
			if len(missing) > 0 || len(foreign) > 0 {
				var why []string
				if len(missing) > 0 {
					why = append(why, "lacks "+strings.Join(missing, ", "))
				}
				if len(foreign) > 0 {
					why = append(why, "has "+strings.Join(foreign, ", "))
				}
				return fmt.Errorf("table %s exists and is not mailspool's (it %s): nothing was changed; rename or drop it, or give the lane another table", table, strings.Join(why, " and "))
			}
			continue
		}
		if m := createIndex.FindStringSubmatch(s); m != nil {
			index, table := unquote(m[1]), unquote(m[2])
			on, err := indexTable(ctx, db, store, index)
			if err != nil {
				return err
			}
			if on != "" && on != table {
				return fmt.Errorf("index %s exists on table %s, not on %s: nothing was changed; drop or rename that index", index, on, table)
			}
		}
	}
	return nil
}

// Execer is what a step's statements and its record run on: the *sql.DB
// on MySQL, the step's transaction on PostgreSQL and SQLite.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Step is one schema step.
type Step struct {
	// Stmts run in order.
	Stmts []string
	// Done, when set, says that an error of a statement means its work is
	// there already (MySQL has no ADD COLUMN IF NOT EXISTS): the step goes
	// on.
	Done func(error) bool
	// Record, when set, runs after the statements, in the same
	// transaction where there is one: it records the step's version.
	Record func(ctx context.Context, ex Execer) error
	// Before, when set, is called before statement i, and with i ==
	// len(Stmts) before Record; an error stops the step there as a failed
	// statement would. Tests use it to cut a migration short at every
	// point.
	Before func(i int) error
}

// Run runs step: in one transaction on PostgreSQL and SQLite, statement by
// statement on MySQL (see the package comment).
func Run(ctx context.Context, db *sql.DB, store sqlstore.Name, step Step) (err error) {
	var ex Execer = db
	if store != sqlstore.MySQL {
		tx, berr := db.BeginTx(ctx, nil)
		if berr != nil {
			return berr
		}
		defer func() {
			if err != nil {
				_ = tx.Rollback()
			}
		}()
		ex = tx
	}
	for i, stmt := range step.Stmts {
		if step.Before != nil {
			if err := step.Before(i); err != nil {
				return err
			}
		}
		if _, err := ex.ExecContext(ctx, stmt); err != nil && (step.Done == nil || !step.Done(err)) {
			return err
		}
	}
	if step.Before != nil {
		if err := step.Before(len(step.Stmts)); err != nil {
			return err
		}
	}
	if step.Record != nil {
		if err := step.Record(ctx, ex); err != nil {
			return err
		}
	}
	if tx, ok := ex.(*sql.Tx); ok {
		return tx.Commit()
	}
	return nil
}

// Create runs the DDL of a package's tables of its own (the suppression
// list, the events, the send limits, the composite transports' health) as
// one step: refused before any DDL if a table or index of theirs is there
// and not mailspool's (Conflicts), in one transaction on PostgreSQL and
// SQLite. Every statement must be safe to run again (IF NOT EXISTS).
func Create(ctx context.Context, db *sql.DB, stmts []string) error {
	store, err := sqlstore.Of(db)
	if err != nil {
		return err
	}
	if err := Conflicts(ctx, db, store, stmts, nil); err != nil {
		return err
	}
	return Run(ctx, db, store, Step{Stmts: stmts})
}

package bench

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/mailspool/mailspool/internal/placeholder"
	"github.com/mailspool/mailspool/queue"
)

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// prepareLane leaves the lane table migrated, holding exactly o.History
// finished rows and nothing else: it reuses a table of an earlier run
// (kept with Options.Keep) that has them, deleting that run's mail, and
// otherwise drops its own tables and creates them afresh. guard has
// checked that every table it may drop is a run's own.
func prepareLane(ctx context.Context, db *sql.DB, o *Options) error {
	t := o.Table
	var have int
	err := db.QueryRowContext(ctx, placeholder.For(db, `SELECT COUNT(*) FROM `+t+` WHERE template = ?`), historyTemplate).Scan(&have)
	if err == nil && o.History > 0 && have == o.History {
		if err := queue.Migrate(ctx, db, t); err != nil {
			return err
		}
		fmt.Fprintf(o.Progress, "reusing the %d history rows of %s\n", have, t)
		stmts := []string{
			`DELETE FROM ` + t + ` WHERE template <> '` + historyTemplate + `'`,
			`DELETE FROM ` + t + `_limits`,
			`DELETE FROM ` + t + `_files`,
		}
		if storeName(db) == "sqlite" {
			stmts = append(stmts, `DELETE FROM `+t+`_bodies WHERE id NOT IN (SELECT body_id FROM `+t+`)`)
		}
		for _, stmt := range stmts {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("bench: clearing %s: %w", t, err)
			}
		}
		return vacuum(ctx, db, t)
	}
	if err := dropOwn(ctx, db, t); err != nil {
		return err
	}
	if err := queue.Migrate(ctx, db, t); err != nil {
		return err
	}
	created, err := listTables(ctx, db)
	if err != nil {
		return err
	}
	for _, tbl := range laneCompanions(t) {
		if name, ok := find(created, tbl); ok { // MySQL has no _bodies table
			if err := mark(ctx, db, name); err != nil {
				return err
			}
		}
	}
	return fillHistory(ctx, db, o)
}

// fillHistory inserts o.History finished rows: a seed enqueued through the
// queue and marked sent, then copied inside the server.
func fillHistory(ctx context.Context, db *sql.DB, o *Options) error {
	if o.History == 0 {
		return nil
	}
	q, err := queue.New(ctx, db, queue.Lane{Table: o.Table, RecipientLimit: queue.NoLimit, IPLimit: queue.NoLimit}, nil)
	if err != nil {
		return err
	}
	// Enqueue a seed (at most half, so that even a small history takes
	// the copy below), then copy it until the table holds o.History.
	seed := min(o.History, 2000, max(o.History/2, 1))
	start := time.Now()
	if err := inTx(ctx, db, func(tx *sql.Tx) error {
		for i := range seed {
			if _, err := q.Enqueue(ctx, tx, message("history", i), queue.Template(historyTemplate)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("bench: seeding the history: %w", err)
	}
	finished := time.Now().Add(-time.Hour).UnixMilli()
	if _, err := db.ExecContext(ctx, placeholder.For(db, `UPDATE `+o.Table+` SET status = ?, next_run = ?, sent_at = ? WHERE template = ?`),
		queue.StatusSent, finished, finished, historyTemplate); err != nil {
		return fmt.Errorf("bench: marking the history sent: %w", err)
	}
	cols, err := copyColumns(ctx, db, o.Table)
	if err != nil {
		return err
	}
	// Copy from a table of its own: copying a table into itself needs a
	// temporary table per statement on MySQL.
	seedTable := o.Table + "_seed"
	// The seed table is new: dropOwn dropped any earlier one.
	if _, err := db.ExecContext(ctx, `CREATE TABLE `+seedTable+` AS SELECT `+cols+` FROM `+o.Table); err != nil {
		return fmt.Errorf("bench: history seed: %w", err)
	}
	if err := mark(ctx, db, seedTable); err != nil {
		return err
	}
	defer db.ExecContext(context.WithoutCancel(ctx), `DROP TABLE `+seedTable) //nolint:errcheck // best effort; dropOwn drops what is left
	for have := seed; have < o.History; {
		n := min(seed, o.History-have)
		stmt := `INSERT INTO ` + o.Table + ` (` + cols + `) SELECT ` + cols + ` FROM ` + seedTable + ` LIMIT ?`
		if _, err := db.ExecContext(ctx, placeholder.For(db, stmt), n); err != nil {
			return fmt.Errorf("bench: copying history rows: %w", err)
		}
		have += n
		if have%(20*seed) == 0 || have == o.History {
			fmt.Fprintf(o.Progress, "history: %d/%d rows, %.0fs\n", have, o.History, time.Since(start).Seconds())
		}
	}
	if storeName(db) == "mysql" {
		if _, err := db.ExecContext(ctx, `ANALYZE TABLE `+o.Table); err != nil {
			return fmt.Errorf("bench: analyze: %w", err)
		}
	}
	return vacuum(ctx, db, o.Table)
}

// vacuum leaves a PostgreSQL lane table as autovacuum would between two
// runs a minute apart: the rows and index entries of the earlier run's
// mail, deleted or updated, gone, and the planner's statistics fresh.
// Without it each run on a reused table stepped over more dead index
// entries than the one before, and its claims slowed round after round.
// Other stores reclaim the space themselves (InnoDB's purge) or leave
// nothing to step over (SQLite deletes in place).
func vacuum(ctx context.Context, db *sql.DB, table string) error {
	if storeName(db) != "postgres" {
		return nil
	}
	if _, err := db.ExecContext(ctx, `VACUUM ANALYZE `+table); err != nil {
		return fmt.Errorf("bench: vacuum %s: %w", table, err)
	}
	return nil
}

// copyColumns lists the columns of table except id and the columns the
// server computes (MySQL refuses a value for those), for INSERT ... SELECT.
func copyColumns(ctx context.Context, db *sql.DB, table string) (string, error) {
	if storeName(db) == "mysql" {
		rows, err := db.QueryContext(ctx, `SELECT column_name FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = ? AND column_name <> 'id' AND is_generated = 'NEVER' ORDER BY ordinal_position`, strings.Trim(table, "`"))
		if err != nil {
			return "", fmt.Errorf("bench: reading the columns of %s: %w", table, err)
		}
		defer rows.Close()
		var cols []string
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err != nil {
				return "", err
			}
			cols = append(cols, c)
		}
		return strings.Join(cols, ", "), rows.Err()
	}
	rows, err := db.QueryContext(ctx, `SELECT * FROM `+table+` LIMIT 0`)
	if err != nil {
		return "", fmt.Errorf("bench: reading the columns of %s: %w", table, err)
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		return "", err
	}
	var cols []string
	for _, n := range names {
		if n != "id" {
			cols = append(cols, n)
		}
	}
	return strings.Join(cols, ", "), nil
}

// notSent counts the run's rows that are not marked sent.
func notSent(ctx context.Context, db *sql.DB, table string) (int, error) {
	var n int
	err := db.QueryRowContext(ctx, placeholder.For(db, `SELECT COUNT(*) FROM `+table+` WHERE template = ? AND status <> ?`), benchTemplate, queue.StatusSent).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("bench: counting rows not sent: %w", err)
	}
	return n, nil
}

package bench

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/mailspool/mailspool/queue"
)

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// laneTables are the tables of a lane table t, as Migrate creates them.
func laneTables(t string) []string { return []string{t, t + "_limits", t + "_bodies", t + "_seed"} }

// prepareLane leaves the lane table migrated, holding exactly o.History
// finished rows and nothing else: it reuses a table that has them (deleting
// an earlier run's mail) and otherwise drops and re-creates it.
func prepareLane(ctx context.Context, db *sql.DB, o *Options) error {
	t := o.Table
	if !tableName.MatchString(t) {
		return fmt.Errorf("bench: invalid table name %q", t)
	}
	var have int
	err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+t+` WHERE template = ?`, historyTemplate).Scan(&have)
	if err == nil && o.History > 0 && have == o.History {
		if err := queue.Migrate(ctx, db, t); err != nil {
			return err
		}
		fmt.Fprintf(o.Progress, "reusing the %d history rows of %s\n", have, t)
		stmts := []string{
			`DELETE FROM ` + t + ` WHERE template <> '` + historyTemplate + `'`,
			`DELETE FROM ` + t + `_limits`,
		}
		if storeName(db) == "sqlite" {
			stmts = append(stmts, `DELETE FROM `+t+`_bodies WHERE id NOT IN (SELECT body_id FROM `+t+`)`)
		}
		for _, stmt := range stmts {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("bench: clearing %s: %w", t, err)
			}
		}
		return nil
	}
	for _, tbl := range laneTables(t) {
		if _, err := db.ExecContext(ctx, `DROP TABLE IF EXISTS `+tbl); err != nil {
			return fmt.Errorf("bench: dropping %s: %w", tbl, err)
		}
	}
	// No schema table yet is fine: Migrate creates it.
	_, _ = db.ExecContext(ctx, `DELETE FROM mailspool_schema WHERE tbl = ?`, t)
	if err := queue.Migrate(ctx, db, t); err != nil {
		return err
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
	if _, err := db.ExecContext(ctx, `UPDATE `+o.Table+` SET status = ?, next_run = ?, sent_at = ? WHERE template = ?`,
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
	for _, stmt := range []string{
		`DROP TABLE IF EXISTS ` + seedTable,
		`CREATE TABLE ` + seedTable + ` AS SELECT ` + cols + ` FROM ` + o.Table,
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("bench: history seed: %w", err)
		}
	}
	defer db.ExecContext(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS `+seedTable) //nolint:errcheck // best effort
	for have := seed; have < o.History; {
		n := min(seed, o.History-have)
		stmt := `INSERT INTO ` + o.Table + ` (` + cols + `) SELECT ` + cols + ` FROM ` + seedTable + ` LIMIT ?`
		if _, err := db.ExecContext(ctx, stmt, n); err != nil {
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
	err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table+` WHERE template = ? AND status <> ?`, benchTemplate, queue.StatusSent).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("bench: counting rows not sent: %w", err)
	}
	return n, nil
}

package suppress

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/mailspool/mailspool/internal/ddl"
	"github.com/mailspool/mailspool/internal/sqlstore"
)

// Table is the suppression list's table, one per database.
const Table = "mailspool_suppressions"

// dialect is the store behind the handle, where the SQL differs; its
// zero value is no store (package sqlstore detects it).
type dialect struct{ sqlstore.Name }

var (
	mysqlDialect    = dialect{sqlstore.MySQL}
	sqliteDialect   = dialect{sqlstore.SQLite}
	postgresDialect = dialect{sqlstore.Postgres}
)

// dialectOf tells the store behind db from its driver.
func dialectOf(db *sql.DB) (dialect, error) {
	n, err := sqlstore.Of(db)
	if err != nil {
		return dialect{}, fmt.Errorf("suppress: %w", err)
	}
	return dialect{n}, nil
}

// upsert is the clause that makes an INSERT of an entry replace the entry
// already there for the same address and scope.
func (d dialect) upsert() string {
	if d == mysqlDialect {
		return ` ON DUPLICATE KEY UPDATE reason = VALUES(reason), source = VALUES(source), created_at = VALUES(created_at), expires_at = VALUES(expires_at)`
	}
	return ` ON CONFLICT (address, scope) DO UPDATE SET reason = excluded.reason, source = excluded.source, created_at = excluded.created_at, expires_at = excluded.expires_at`
}

// upsertLonger is upsert that replaces only an entry that ends sooner
// than the new one: one that expires, before the new one does or when the
// new one never does. On MySQL each column is set under that condition,
// expires_at last, so that the condition reads the old expires_at
// throughout (MySQL assigns left to right, later ones seeing the new
// values).
func (d dialect) upsertLonger() string {
	if d == mysqlDialect {
		const longer = `expires_at IS NOT NULL AND (VALUES(expires_at) IS NULL OR VALUES(expires_at) > expires_at)`
		return ` ON DUPLICATE KEY UPDATE reason = IF(` + longer + `, VALUES(reason), reason), source = IF(` + longer + `, VALUES(source), source),` +
			` created_at = IF(` + longer + `, VALUES(created_at), created_at), expires_at = IF(` + longer + `, VALUES(expires_at), expires_at)`
	}
	return d.upsert() + ` WHERE ` + Table + `.expires_at IS NOT NULL AND (excluded.expires_at IS NULL OR excluded.expires_at > ` + Table + `.expires_at)`
}

// createSQL is the table's DDL, each statement safe to run again.
func (d dialect) createSQL() []string {
	switch d {
	case mysqlDialect:
		return []string{`CREATE TABLE IF NOT EXISTS ` + Table + ` (
  address    VARCHAR(254) NOT NULL COMMENT 'normalized (suppress.Normalize)',
  scope      VARCHAR(64) NOT NULL COMMENT 'all, or a lane name',
  reason     VARCHAR(16) CHARACTER SET ascii NOT NULL,
  source     VARCHAR(255) NOT NULL DEFAULT '' COMMENT 'mail, provider event or operator',
  created_at BIGINT NOT NULL COMMENT 'unix ms',
  expires_at BIGINT NULL COMMENT 'unix ms; NULL = until removed',
  PRIMARY KEY (address, scope),
  KEY idx_created (created_at),
  KEY idx_reason (reason, scope, expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`}
	default:
		return []string{`CREATE TABLE IF NOT EXISTS ` + Table + ` (
  address    VARCHAR(254) NOT NULL,
  scope      VARCHAR(64) NOT NULL,
  reason     VARCHAR(16) NOT NULL,
  source     VARCHAR(255) NOT NULL DEFAULT '',
  created_at BIGINT NOT NULL,
  expires_at BIGINT NULL,
  PRIMARY KEY (address, scope)
)`, `CREATE INDEX IF NOT EXISTS ` + Table + `_idx_created ON ` + Table + ` (created_at)`,
			`CREATE INDEX IF NOT EXISTS ` + Table + `_idx_reason ON ` + Table + ` (reason, scope, expires_at)`}
	}
}

// Migrate creates the suppression table if it is not there. It is
// idempotent; mailspool migrate runs it beside the queue's migrations.
func Migrate(ctx context.Context, db *sql.DB) error {
	d, err := dialectOf(db)
	if err != nil {
		return err
	}
	// A table of this name that is not mailspool's stops the migration
	// before any DDL; the statements run in one transaction on
	// PostgreSQL and SQLite (on MySQL there is one, CREATE TABLE IF NOT
	// EXISTS).
	store := d.Name
	if err := ddl.Conflicts(ctx, db, store, append(d.createSQL(), d.bypassSQL()...), nil); err != nil {
		return fmt.Errorf("suppress: migrate: %w", err)
	}
	if err := ddl.Run(ctx, db, store, ddl.Step{Stmts: append(d.createSQL(), d.bypassSQL()...)}); err != nil {
		return fmt.Errorf("suppress: migrate: %w", err)
	}
	if d == mysqlDialect {
		// A table made before idx_reason (the counts by reason) gains it;
		// MySQL has no ADD KEY IF NOT EXISTS.
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = ? AND index_name = 'idx_reason'`, Table).Scan(&n); err != nil {
			return fmt.Errorf("suppress: migrate: %w", err)
		}
		if n == 0 {
			if _, err := db.ExecContext(ctx, `ALTER TABLE `+Table+` ADD KEY idx_reason (reason, scope, expires_at)`); err != nil && !strings.Contains(err.Error(), "Duplicate key name") {
				return fmt.Errorf("suppress: migrate: %w", err)
			}
		}
	}
	return nil
}

// SchemaSQL is the DDL Migrate runs on a store ("mysql" for MySQL and
// MariaDB, "sqlite", "postgres"), for a schema tool of the operator's own.
func SchemaSQL(store string) ([]string, error) {
	switch store {
	case "mysql":
		return append(mysqlDialect.createSQL(), mysqlDialect.bypassSQL()...), nil
	case "sqlite":
		return append(sqliteDialect.createSQL(), sqliteDialect.bypassSQL()...), nil
	case "postgres":
		return append(postgresDialect.createSQL(), postgresDialect.bypassSQL()...), nil
	}
	return nil, fmt.Errorf("suppress: unknown store %q (want mysql, sqlite or postgres)", store)
}

// CheckSchema reports whether the suppression table is there with every
// column the list reads and writes. A worker checks it before it claims a
// row: every claim reads the list, so a program started against a database
// that 'mailspool migrate' has not brought up to date refuses to start with
// that advice, instead of failing each claim.
func CheckSchema(ctx context.Context, db *sql.DB) error {
	if _, err := dialectOf(db); err != nil {
		return err
	}
	// In order: the list's own table first, so that a database without
	// any of them is told about that one.
	for _, t := range []struct{ table, cols string }{{Table, entryColumns}, {BypassTable, `lane, mail_id, address, reason, why, created_at`}} {
		rows, err := db.QueryContext(ctx, `SELECT `+t.cols+` FROM `+t.table+` WHERE 1 = 0`)
		if err != nil && ctx.Err() != nil {
			return fmt.Errorf("suppress: checking the table %s: %w", t.table, ctx.Err()) // stopped, not missing
		}
		if err != nil {
			return fmt.Errorf("suppress: the suppression list's table %s is missing or incomplete: run 'mailspool migrate' (%v)", t.table, err)
		}
		rows.Close()
	}
	return nil
}

package queue

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"time"
)

// DefaultTable is the table of a Lane that names none.
const DefaultTable = "mail_queue"

// Row states, as stored in the status column.
const (
	StatusPending = 0
	StatusSending = 1
	StatusSent    = 2
	StatusRetry   = 3
	StatusFailed  = 4
)

// StatusName returns the name of a stored status ("pending", ...).
func StatusName(status int) string {
	switch status {
	case StatusPending:
		return "pending"
	case StatusSending:
		return "sending"
	case StatusSent:
		return "sent"
	case StatusRetry:
		return "retry"
	case StatusFailed:
		return "failed"
	}
	return fmt.Sprintf("status(%d)", status)
}

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,56}$`)

func validTable(name string) error {
	if !tableName.MatchString(name) {
		return fmt.Errorf("queue: invalid table name %q (letters, digits and _, at most 57, not starting with a digit)", name)
	}
	return nil
}

// migration is one schema step for one lane table. Each statement must be
// safe to run again: MySQL commits DDL implicitly, so a step interrupted
// halfway is simply re-run.
type migration struct {
	version int
	// addsColumn, when set, names the column the step adds: the step is
	// skipped if the table already has it (ADD COLUMN cannot be re-run, and
	// MySQL has no ADD COLUMN IF NOT EXISTS).
	addsColumn string
	mysql      []string // %[1]s is the quoted table, %[2]s the quoted limits table, %[3]s the bare table name
	sqlite     []string
}

var migrations = []migration{{
	version: 1,
	mysql: []string{`CREATE TABLE IF NOT EXISTS %[1]s (
  id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  status          TINYINT UNSIGNED NOT NULL DEFAULT 0,
  attempts        SMALLINT UNSIGNED NOT NULL DEFAULT 0,
  max_attempts    SMALLINT UNSIGNED NOT NULL DEFAULT 5,
  next_run        BIGINT NOT NULL COMMENT 'unix ms: due (pending/retry), lease end (sending), finished (sent/failed)',
  locked_until    BIGINT NOT NULL DEFAULT 0 COMMENT 'unix ms: lease end while sending',
  locked_by       CHAR(32) CHARACTER SET ascii NOT NULL DEFAULT '' COMMENT 'claim token while sending',
  not_after       BIGINT NOT NULL DEFAULT 0 COMMENT 'unix ms: never send after this; 0 = no deadline',
  created_at      BIGINT NOT NULL,
  sent_at         BIGINT NOT NULL DEFAULT 0,
  last_kind       CHAR(10) CHARACTER SET ascii NOT NULL DEFAULT '',
  last_code       SMALLINT UNSIGNED NOT NULL DEFAULT 0,
  maybe_delivered TINYINT UNSIGNED NOT NULL DEFAULT 0,
  last_error      VARCHAR(512) NOT NULL DEFAULT '',
  provider_id     VARCHAR(255) NOT NULL DEFAULT '',
  message_id      VARCHAR(255) CHARACTER SET ascii NOT NULL,
  idem_key        VARCHAR(191) COLLATE utf8mb4_bin NULL,
  template        VARCHAR(64) NOT NULL DEFAULT '',
  client_ip       VARCHAR(45) CHARACTER SET ascii NOT NULL DEFAULT '',
  from_addr       VARCHAR(254) NOT NULL,
  from_name       VARCHAR(255) NOT NULL DEFAULT '',
  to_addr         VARCHAR(254) NOT NULL,
  to_name         VARCHAR(255) NOT NULL DEFAULT '',
  reply_to_addr   VARCHAR(254) NOT NULL DEFAULT '',
  reply_to_name   VARCHAR(255) NOT NULL DEFAULT '',
  subject         VARCHAR(998) NOT NULL,
  text_body       MEDIUMTEXT NOT NULL,
  html_body       MEDIUMTEXT NOT NULL,
  headers         MEDIUMTEXT NOT NULL COMMENT 'JSON [[name, value], ...]',
  PRIMARY KEY (id),
  UNIQUE KEY uk_idem (idem_key),
  KEY idx_pick (status, next_run, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
		`CREATE TABLE IF NOT EXISTS %[2]s (
  lkey         CHAR(64) CHARACTER SET ascii NOT NULL COMMENT 'sha256 of the limit and its subject',
  window_start BIGINT NOT NULL,
  n            INT NOT NULL,
  PRIMARY KEY (lkey, window_start),
  KEY idx_window (window_start)
) ENGINE=InnoDB`},
	sqlite: []string{`CREATE TABLE IF NOT EXISTS %[1]s (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  status          INTEGER NOT NULL DEFAULT 0,
  attempts        INTEGER NOT NULL DEFAULT 0,
  max_attempts    INTEGER NOT NULL DEFAULT 5,
  next_run        INTEGER NOT NULL,
  locked_until    INTEGER NOT NULL DEFAULT 0,
  locked_by       TEXT NOT NULL DEFAULT '',
  not_after       INTEGER NOT NULL DEFAULT 0,
  created_at      INTEGER NOT NULL,
  sent_at         INTEGER NOT NULL DEFAULT 0,
  last_kind       TEXT NOT NULL DEFAULT '',
  last_code       INTEGER NOT NULL DEFAULT 0,
  maybe_delivered INTEGER NOT NULL DEFAULT 0,
  last_error      TEXT NOT NULL DEFAULT '',
  provider_id     TEXT NOT NULL DEFAULT '',
  message_id      TEXT NOT NULL,
  idem_key        TEXT NULL,
  template        TEXT NOT NULL DEFAULT '',
  client_ip       TEXT NOT NULL DEFAULT '',
  from_addr       TEXT NOT NULL,
  from_name       TEXT NOT NULL DEFAULT '',
  to_addr         TEXT NOT NULL,
  to_name         TEXT NOT NULL DEFAULT '',
  reply_to_addr   TEXT NOT NULL DEFAULT '',
  reply_to_name   TEXT NOT NULL DEFAULT '',
  subject         TEXT NOT NULL,
  text_body       TEXT NOT NULL,
  html_body       TEXT NOT NULL,
  headers         TEXT NOT NULL
)`,
		`CREATE UNIQUE INDEX IF NOT EXISTS "%[3]s_uk_idem" ON %[1]s (idem_key)`,
		`CREATE INDEX IF NOT EXISTS "%[3]s_idx_pick" ON %[1]s (status, next_run, id)`,
		`CREATE TABLE IF NOT EXISTS %[2]s (
  lkey         TEXT NOT NULL,
  window_start INTEGER NOT NULL,
  n            INTEGER NOT NULL,
  PRIMARY KEY (lkey, window_start)
)`,
		`CREATE INDEX IF NOT EXISTS "%[3]s_limits_idx_window" ON %[2]s (window_start)`},
}, {
	// Version 2: crashes counts the leases that expired while the row was
	// sending (see state.go); after maxCrashes the row fails as poison.
	version:    2,
	addsColumn: "crashes",
	mysql:      []string{`ALTER TABLE %[1]s ADD COLUMN crashes TINYINT UNSIGNED NOT NULL DEFAULT 0 AFTER attempts`},
	sqlite:     []string{`ALTER TABLE %[1]s ADD COLUMN crashes INTEGER NOT NULL DEFAULT 0`},
}, {
	// Version 3: last_rule names the classification rule that decided the
	// last failure (classify's built-in rule or "operator:NAME").
	version:    3,
	addsColumn: "last_rule",
	mysql:      []string{`ALTER TABLE %[1]s ADD COLUMN last_rule VARCHAR(80) NOT NULL DEFAULT '' AFTER last_code`},
	sqlite:     []string{`ALTER TABLE %[1]s ADD COLUMN last_rule TEXT NOT NULL DEFAULT ''`},
}, {
	// Version 6: provider_id, written when a mail is sent, is fixed-width,
	// so that InnoDB updates the row in place on completion instead of
	// rewriting the whole row with its bodies (redo per mail falls about
	// tenfold). Provider ids are ASCII (Message-ID headers, API ids).
	version: 6,
	mysql:   []string{`ALTER TABLE %[1]s MODIFY provider_id CHAR(255) CHARACTER SET ascii NOT NULL DEFAULT ''`},
	sqlite:  nil, // SQLite rewrites the row whatever the column type
}}

// SchemaVersion is the schema version Migrate brings a lane table to.
func SchemaVersion() int { return migrations[len(migrations)-1].version }

const schemaTable = "mailspool_schema"

// Migrate creates or upgrades the tables of the given lane tables
// (DefaultTable when none is given) to SchemaVersion. It is idempotent, and
// safe to re-run after an interruption. The version of each lane table is
// kept in the mailspool_schema table.
func Migrate(ctx context.Context, db *sql.DB, tables ...string) error {
	d, err := detectDialect(ctx, db)
	if err != nil {
		return err
	}
	if len(tables) == 0 {
		tables = []string{DefaultTable}
	}
	create := `CREATE TABLE IF NOT EXISTS ` + d.quote(schemaTable) + ` (tbl VARCHAR(64) NOT NULL PRIMARY KEY, version INT NOT NULL, applied_at BIGINT NOT NULL)`
	if _, err := db.ExecContext(ctx, create); err != nil {
		return fmt.Errorf("queue: migrate: creating %s: %w", schemaTable, err)
	}
	for _, table := range tables {
		if err := validTable(table); err != nil {
			return err
		}
		if err := migrateTable(ctx, db, d, table); err != nil {
			return err
		}
	}
	return nil
}

func migrateTable(ctx context.Context, db *sql.DB, d dialect, table string) error {
	current, err := schemaVersionOf(ctx, db, d, table)
	if err != nil {
		return err
	}
	if current > SchemaVersion() {
		return fmt.Errorf("queue: migrate: table %s is at schema version %d, newer than this program's %d; upgrade mailspool", table, current, SchemaVersion())
	}
	for _, m := range migrations {
		if m.version <= current {
			continue
		}
		stmts := m.mysql
		if d.sqlite {
			stmts = m.sqlite
		}
		if m.addsColumn != "" {
			has, err := hasColumn(ctx, db, d, table, m.addsColumn)
			if err != nil {
				return err
			}
			if has {
				stmts = nil
			}
		}
		for _, s := range stmts {
			q := fmt.Sprintf(s, d.quote(table), d.quote(table+"_limits"), table)
			if _, err := db.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("queue: migrate %s to version %d: %w", table, m.version, err)
			}
		}
		var upsert string
		if d.sqlite {
			upsert = `INSERT INTO ` + d.quote(schemaTable) + ` (tbl, version, applied_at) VALUES (?, ?, ?) ON CONFLICT (tbl) DO UPDATE SET version = excluded.version, applied_at = excluded.applied_at`
		} else {
			upsert = `INSERT INTO ` + d.quote(schemaTable) + ` (tbl, version, applied_at) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE version = VALUES(version), applied_at = VALUES(applied_at)`
		}
		if _, err := db.ExecContext(ctx, upsert, table, m.version, time.Now().UnixMilli()); err != nil {
			return fmt.Errorf("queue: migrate: recording version %d of %s: %w", m.version, table, err)
		}
	}
	return nil
}

// hasColumn reports whether table has column.
func hasColumn(ctx context.Context, db *sql.DB, d dialect, table, column string) (bool, error) {
	var n int
	var err error
	if d.sqlite {
		err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?`, table, column).Scan(&n)
	} else {
		err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ? AND column_name = ?`, table, column).Scan(&n)
	}
	if err != nil {
		return false, fmt.Errorf("queue: migrate: looking for column %s of %s: %w", column, table, err)
	}
	return n > 0, nil
}

func schemaVersionOf(ctx context.Context, db *sql.DB, d dialect, table string) (int, error) {
	var v int
	err := db.QueryRowContext(ctx, `SELECT version FROM `+d.quote(schemaTable)+` WHERE tbl = ?`, table).Scan(&v)
	if err == sql.ErrNoRows {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("queue: reading the schema version of %s: %w", table, err)
	}
	return v, nil
}

// CheckSchema returns an error unless table is at SchemaVersion, telling
// the operator to run "mailspool migrate" (or queue.Migrate).
func CheckSchema(ctx context.Context, db *sql.DB, table string) error {
	d, err := detectDialect(ctx, db)
	if err != nil {
		return err
	}
	v, err := schemaVersionOf(ctx, db, d, table)
	if err != nil {
		// Most likely mailspool_schema does not exist yet.
		return fmt.Errorf("queue: table %s has no schema version (run 'mailspool migrate'): %w", table, err)
	}
	if v != SchemaVersion() {
		return fmt.Errorf("queue: table %s is at schema version %d, this program needs %d: run 'mailspool migrate'", table, v, SchemaVersion())
	}
	return nil
}

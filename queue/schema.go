package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/mailspool/mailspool/internal/ddl"
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
	lower := strings.ToLower(name)
	switch {
	case !tableName.MatchString(name):
		return fmt.Errorf("queue: invalid table name %q (letters, digits and _, at most 57, not starting with a digit)", name)
	case slices.Contains(OwnTables, lower):
		return fmt.Errorf("queue: table name %q is one of mailspool's own tables (%s)", name, strings.Join(OwnTables, ", "))
	case strings.HasSuffix(lower, "_limits"):
		return fmt.Errorf("queue: table name %q ends in _limits, which is reserved for the rate-limit table of the lane whose table is %q", name, name[:len(name)-len("_limits")])
	case strings.HasSuffix(lower, "_files"):
		return fmt.Errorf("queue: table name %q ends in _files, which is reserved for the table of attachments of the lane whose table is %q", name, name[:len(name)-len("_files")])
	case strings.HasSuffix(lower, "_bodies"):
		return fmt.Errorf("queue: table name %q ends in _bodies, which is reserved for the table of mail bodies of the lane whose table is %q", name, name[:len(name)-len("_bodies")])
	}
	return nil
}

// distinctTables refuses a list of lane tables in which two are one table:
// SQLite (and MySQL on some systems) ignore the case of table names.
func distinctTables(tables []string) error {
	seen := map[string]string{}
	for _, t := range tables {
		if other, dup := seen[strings.ToLower(t)]; dup {
			return fmt.Errorf("queue: tables %q and %q are the same table (names are compared without case)", other, t)
		}
		seen[strings.ToLower(t)] = t
	}
	return nil
}

// OwnTables are the tables mailspool creates besides each lane's own
// (table, table_limits, table_bodies), in one list: a lane's table may be
// none of them, and Lane.Validate and Migrate say so before any DDL runs.
// A package that adds a shared table adds it here.
var OwnTables = []string{schemaTable, lanesTable, alertsTable, runsTable, suppressionsTable, bypassesTable, eventsTable,
	throttleTable, throttleSlotsTable, membersTable, memberPinsTable}

// The tables of packages that build on the queue, named here so that no
// lane takes them (internal/ddl's TestNoLaneTakesASharedTable checks that
// the names agree): the suppression list (suppress.Table), the provider
// events (inbound.Table), the send limits (throttle.KeysTable,
// throttle.SlotsTable) and the composite transports' member health
// (composite.MembersTable, composite.PinsTable).
const (
	suppressionsTable  = "mailspool_suppressions"
	bypassesTable      = "mailspool_suppression_bypasses"
	eventsTable        = "mailspool_events"
	throttleTable      = "mailspool_throttle"
	throttleSlotsTable = "mailspool_throttle_slots"
	membersTable       = "mailspool_members"
	memberPinsTable    = "mailspool_member_pins"
)

// The tables the alerter keeps its state in (see SharedTables).
const (
	alertsTable = "mailspool_alerts"
	runsTable   = "mailspool_runs"
)

// migration is one schema step for one lane table. Each statement must be
// safe to run again: MySQL commits DDL implicitly, so a step interrupted
// halfway is simply re-run (an ADD COLUMN or ADD KEY that finds its column
// or key there already counts as done). Versions increase along the list;
// gaps are allowed.
type migration struct {
	version int
	// addsColumn, when set, names the column the step adds: the step is
	// skipped if the table already has it.
	addsColumn string
	mysql      []string // %[1]s is the quoted table, %[2]s the quoted limits table, %[3]s the bare table name, %[4]s the quoted lanes table, %[5]s the quoted bodies table, %[6]s the quoted files table
	sqlite     []string
	// postgres: PostgreSQL came with version 8. Its steps follow the
	// others' where a column or a table appears; the limits table is made
	// at once in version 7's shape, and it keeps the bodies in the row.
	// Every later step needs its PostgreSQL statements
	// (TestSchemaColumnsAgree compares the stores' tables).
	postgres []string
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
	postgres: []string{`CREATE TABLE IF NOT EXISTS %[1]s (
  id              BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  status          SMALLINT NOT NULL DEFAULT 0,
  attempts        SMALLINT NOT NULL DEFAULT 0,
  max_attempts    SMALLINT NOT NULL DEFAULT 5,
  next_run        BIGINT NOT NULL,
  locked_until    BIGINT NOT NULL DEFAULT 0,
  locked_by       TEXT NOT NULL DEFAULT '',
  not_after       BIGINT NOT NULL DEFAULT 0,
  created_at      BIGINT NOT NULL,
  sent_at         BIGINT NOT NULL DEFAULT 0,
  last_kind       TEXT NOT NULL DEFAULT '',
  last_code       INTEGER NOT NULL DEFAULT 0,
  maybe_delivered SMALLINT NOT NULL DEFAULT 0,
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
  lkey         TEXT NOT NULL PRIMARY KEY,
  window_start BIGINT NOT NULL,
  n            INTEGER NOT NULL,
  prev_n       INTEGER NOT NULL DEFAULT 0
)`,
		`CREATE INDEX IF NOT EXISTS "%[3]s_limits_idx_window" ON %[2]s (window_start)`},
}, {
	// Version 2: crashes counts the leases that expired while the row was
	// sending (see state.go); after maxCrashes the row fails as poison.
	version:    2,
	addsColumn: "crashes",
	mysql:      []string{`ALTER TABLE %[1]s ADD COLUMN crashes TINYINT UNSIGNED NOT NULL DEFAULT 0 AFTER attempts`},
	sqlite:     []string{`ALTER TABLE %[1]s ADD COLUMN crashes INTEGER NOT NULL DEFAULT 0`},
	postgres:   []string{`ALTER TABLE %[1]s ADD COLUMN IF NOT EXISTS crashes SMALLINT NOT NULL DEFAULT 0`},
}, {
	// Version 3: last_rule names the classification rule that decided the
	// last failure (classify's built-in rule or "operator:NAME").
	version:    3,
	addsColumn: "last_rule",
	mysql:      []string{`ALTER TABLE %[1]s ADD COLUMN last_rule VARCHAR(80) NOT NULL DEFAULT '' AFTER last_code`},
	sqlite:     []string{`ALTER TABLE %[1]s ADD COLUMN last_rule TEXT NOT NULL DEFAULT ''`},
	postgres:   []string{`ALTER TABLE %[1]s ADD COLUMN IF NOT EXISTS last_rule TEXT NOT NULL DEFAULT ''`},
}, {
	// Operations: find mail by recipient, keep a line per operator action,
	// pause a lane. On MySQL/MariaDB the recipient index is on a virtual
	// column of 8 bytes of SHA-256 of the lower-cased address (fixed width,
	// computed by the server, nothing stored in the row); SQLite indexes
	// lower(to_addr) itself.
	version: 4,
	mysql: []string{
		`ALTER TABLE %[1]s ADD COLUMN to_hash BINARY(8) AS (UNHEX(LEFT(SHA2(LOWER(to_addr), 256), 16))) VIRTUAL COMMENT 'SHA-256 of the lower-cased recipient, first 8 bytes: find mail by recipient'`,
		`ALTER TABLE %[1]s ADD KEY idx_to (to_hash)`,
		`ALTER TABLE %[1]s ADD COLUMN history VARCHAR(1024) NOT NULL DEFAULT '' COMMENT 'operator actions (retry, cancel), one line each, oldest dropped first'`,
		`CREATE TABLE IF NOT EXISTS %[4]s (
  tbl            VARCHAR(64) CHARACTER SET ascii NOT NULL COMMENT 'the lane table',
  paused_at      BIGINT NOT NULL DEFAULT 0 COMMENT 'unix ms: paused by an operator; 0 = not paused',
  pause_reason   VARCHAR(255) NOT NULL DEFAULT '',
  breaker_until  BIGINT NOT NULL DEFAULT 0 COMMENT 'unix ms: a worker''s breaker holds the lane until then',
  breaker_reason VARCHAR(255) NOT NULL DEFAULT '',
  PRIMARY KEY (tbl)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`},
	sqlite: []string{
		`CREATE INDEX IF NOT EXISTS "%[3]s_idx_to" ON %[1]s (lower(to_addr))`,
		`ALTER TABLE %[1]s ADD COLUMN history TEXT NOT NULL DEFAULT ''`,
		`CREATE TABLE IF NOT EXISTS %[4]s (
  tbl            TEXT NOT NULL PRIMARY KEY,
  paused_at      INTEGER NOT NULL DEFAULT 0,
  pause_reason   TEXT NOT NULL DEFAULT '',
  breaker_until  INTEGER NOT NULL DEFAULT 0,
  breaker_reason TEXT NOT NULL DEFAULT ''
)`},
	postgres: []string{
		`CREATE INDEX IF NOT EXISTS "%[3]s_idx_to" ON %[1]s (lower(to_addr))`,
		`ALTER TABLE %[1]s ADD COLUMN IF NOT EXISTS history TEXT NOT NULL DEFAULT ''`,
		`CREATE TABLE IF NOT EXISTS %[4]s (
  tbl            TEXT NOT NULL PRIMARY KEY,
  paused_at      BIGINT NOT NULL DEFAULT 0,
  pause_reason   TEXT NOT NULL DEFAULT '',
  breaker_until  BIGINT NOT NULL DEFAULT 0,
  breaker_reason TEXT NOT NULL DEFAULT ''
)`},
}, {
	// Version 6: provider_id, written when a mail is sent, is fixed-width,
	// so that InnoDB updates the row in place on completion instead of
	// rewriting the whole row with its bodies (redo per mail falls about
	// tenfold). Provider ids are ASCII (Message-ID headers, API ids).
	version: 6,
	mysql:   []string{`ALTER TABLE %[1]s MODIFY provider_id CHAR(255) CHARACTER SET ascii NOT NULL DEFAULT ''`},
	sqlite:  nil, // SQLite rewrites the row whatever the column type
}, {
	// Version 7: one rate-limit counter row per limited subject, holding
	// its current window's count and the previous window's, so that one
	// upsert both counts an enqueue and returns what the limit needs (see
	// limits.go); before, a row per subject and window, read back by a
	// second statement. Counters are short-lived: the old table's are
	// dropped, so every limit starts a fresh window at the upgrade.
	version: 7,
	mysql: []string{
		`DROP TABLE IF EXISTS %[2]s`,
		`CREATE TABLE %[2]s (
  lkey         CHAR(64) CHARACTER SET ascii NOT NULL COMMENT 'sha256 of the limit and its subject',
  window_start BIGINT NOT NULL COMMENT 'unix ms: start of the window n counts',
  n            INT NOT NULL COMMENT 'enqueues counted in that window',
  prev_n       INT NOT NULL DEFAULT 0 COMMENT 'enqueues counted in the window before it',
  PRIMARY KEY (lkey),
  KEY idx_window (window_start)
) ENGINE=InnoDB`},
	sqlite: []string{
		`DROP TABLE IF EXISTS %[2]s`,
		`CREATE TABLE %[2]s (
  lkey         TEXT NOT NULL PRIMARY KEY,
  window_start INTEGER NOT NULL,
  n            INTEGER NOT NULL,
  prev_n       INTEGER NOT NULL DEFAULT 0
)`,
		`CREATE INDEX IF NOT EXISTS "%[3]s_limits_idx_window" ON %[2]s (window_start)`},
}, {
	// Version 8, SQLite only: a new mail's bodies and headers go into a
	// table of their own, <table>_bodies, and its row names them by
	// body_id. SQLite rewrites a whole row, overflow pages included, when
	// any column of it changes: each claim and each completion copied the
	// whole mail (about 4 KB) into the write-ahead log, which halved the
	// drain. Rows enqueued before keep their bodies inline (body_id = 0);
	// readers take a row's bodies from wherever they are (Queue.withBodies).
	// MySQL/MariaDB update a row in place (version 6), and a second table
	// only costs the enqueue a statement: nothing changes there.
	version: 8,
	mysql:   nil,
	sqlite: []string{
		`CREATE TABLE IF NOT EXISTS %[5]s (
  id        INTEGER PRIMARY KEY AUTOINCREMENT,
  text_body TEXT NOT NULL,
  html_body TEXT NOT NULL,
  headers   TEXT NOT NULL
)`,
		`ALTER TABLE %[1]s ADD COLUMN body_id INTEGER NOT NULL DEFAULT 0`},
}, {
	// Version 9: last_scope says what the last failure was about
	// (transport.Scope's name: recipient, message, sender, transient,
	// lane), beside the rule that decided it.
	version:    9,
	addsColumn: "last_scope",
	mysql:      []string{`ALTER TABLE %[1]s ADD COLUMN last_scope VARCHAR(16) CHARACTER SET ascii NOT NULL DEFAULT '' AFTER last_rule`},
	sqlite:     []string{`ALTER TABLE %[1]s ADD COLUMN last_scope TEXT NOT NULL DEFAULT ''`},
	postgres:   []string{`ALTER TABLE %[1]s ADD COLUMN IF NOT EXISTS last_scope TEXT NOT NULL DEFAULT ''`},
}, {
	// Version 10: attachments. A mail's files are rows of <table>_files,
	// cut into chunks (see files.go); its row counts them, so that the
	// worker reads the files table only for mail that has some.
	version: 10,
	mysql: []string{
		`CREATE TABLE IF NOT EXISTS %[6]s (
  mail_id      BIGINT UNSIGNED NOT NULL COMMENT 'the id of the mail in the lane table',
  part         SMALLINT UNSIGNED NOT NULL COMMENT 'the attachment, 0 for the first',
  chunk        INT UNSIGNED NOT NULL COMMENT 'the piece of the file, 0 for the first',
  filename     VARCHAR(255) NOT NULL,
  content_type VARCHAR(255) CHARACTER SET ascii NOT NULL,
  content_id   VARCHAR(250) CHARACTER SET ascii NOT NULL DEFAULT '' COMMENT 'inline parts: referenced by the HTML as cid:content_id',
  inline       TINYINT UNSIGNED NOT NULL DEFAULT 0,
  size         INT UNSIGNED NOT NULL COMMENT 'the whole file, in bytes',
  data         MEDIUMBLOB NOT NULL COMMENT 'at most 1 MiB of the file',
  PRIMARY KEY (mail_id, part, chunk)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
		`ALTER TABLE %[1]s ADD COLUMN attachments SMALLINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'files in the _files table'`},
	sqlite: []string{
		`CREATE TABLE IF NOT EXISTS %[6]s (
  mail_id      INTEGER NOT NULL,
  part         INTEGER NOT NULL,
  chunk        INTEGER NOT NULL,
  filename     TEXT NOT NULL,
  content_type TEXT NOT NULL,
  content_id   TEXT NOT NULL DEFAULT '',
  inline       INTEGER NOT NULL DEFAULT 0,
  size         INTEGER NOT NULL,
  data         BLOB NOT NULL,
  PRIMARY KEY (mail_id, part, chunk)
)`,
		`ALTER TABLE %[1]s ADD COLUMN attachments INTEGER NOT NULL DEFAULT 0`},
	postgres: []string{
		`CREATE TABLE IF NOT EXISTS %[6]s (
  mail_id      BIGINT NOT NULL,
  part         SMALLINT NOT NULL,
  chunk        INTEGER NOT NULL,
  filename     TEXT NOT NULL,
  content_type TEXT NOT NULL,
  content_id   TEXT NOT NULL DEFAULT '',
  inline       SMALLINT NOT NULL DEFAULT 0,
  size         INTEGER NOT NULL,
  data         BYTEA NOT NULL,
  PRIMARY KEY (mail_id, part, chunk)
)`,
		`ALTER TABLE %[1]s ADD COLUMN IF NOT EXISTS attachments SMALLINT NOT NULL DEFAULT 0`},
}, {
	// Version 11: priorities. nice is 9 - the priority given at enqueue
	// (queue.Priority), so that the claim reads its index ascending on
	// every server: due mail is claimed lowest nice first, then oldest
	// first, from idx_claim (status, nice, next_run, id). idx_pick stays
	// for everything that reads a status by time (cleanup, the rescuer,
	// the monitoring counts). One ALTER on MySQL, so that an interrupted
	// run adds both or neither.
	version: 11,
	mysql: []string{
		`ALTER TABLE %[1]s ADD COLUMN nice TINYINT UNSIGNED NOT NULL DEFAULT 4 COMMENT '9 - priority: due mail is claimed lowest nice first, then oldest', ADD KEY idx_claim (status, nice, next_run, id)`},
	sqlite: []string{
		`ALTER TABLE %[1]s ADD COLUMN nice INTEGER NOT NULL DEFAULT 4`,
		`CREATE INDEX IF NOT EXISTS "%[3]s_idx_claim" ON %[1]s (status, nice, next_run, id)`},
	postgres: []string{
		`ALTER TABLE %[1]s ADD COLUMN IF NOT EXISTS nice SMALLINT NOT NULL DEFAULT 4`,
		`CREATE INDEX IF NOT EXISTS "%[3]s_idx_claim" ON %[1]s (status, nice, next_run, id)`},
}, {
	// Version 12: support looks mail up by its Message-ID header and by
	// the id its provider returned (show and list --message-id,
	// --provider-id; list --event by provider id): both through an index,
	// never a scan. The provider id's entry is written once, when the mail
	// is sent. One ALTER on MySQL, so that an interrupted run adds both or
	// neither.
	version: 12,
	mysql: []string{
		`ALTER TABLE %[1]s ADD KEY idx_message_id (message_id), ADD KEY idx_provider_id (provider_id)`},
	sqlite: []string{
		`CREATE INDEX IF NOT EXISTS "%[3]s_idx_message_id" ON %[1]s (message_id)`,
		`CREATE INDEX IF NOT EXISTS "%[3]s_idx_provider_id" ON %[1]s (provider_id)`},
	postgres: []string{
		`CREATE INDEX IF NOT EXISTS "%[3]s_idx_message_id" ON %[1]s (message_id)`,
		`CREATE INDEX IF NOT EXISTS "%[3]s_idx_provider_id" ON %[1]s (provider_id)`},
}, {
	// Version 13: member names the member of a composite transport
	// (failover(...), roundrobin(...)) that gave the last outcome. Fixed
	// width and ASCII on MySQL/MariaDB, so that a completion still
	// updates the row in place (version 6).
	version: 13,
	mysql: []string{
		`ALTER TABLE %[1]s ADD COLUMN member CHAR(64) CHARACTER SET ascii NOT NULL DEFAULT '' COMMENT 'the composite transport member of the last outcome'`},
	sqlite: []string{
		`ALTER TABLE %[1]s ADD COLUMN member TEXT NOT NULL DEFAULT ''`},
	postgres: []string{
		`ALTER TABLE %[1]s ADD COLUMN IF NOT EXISTS member TEXT NOT NULL DEFAULT ''`},
}}

// SchemaVersion is the schema version Migrate brings a lane table to.
func SchemaVersion() int { return migrations[len(migrations)-1].version }

const schemaTable = "mailspool_schema"

// SharedTables are the tables Migrate creates once per database, beside
// the lane tables, in SQL that MySQL/MariaDB, PostgreSQL and SQLite accept:
// mailspool_alerts holds each alert condition's state so that the worker
// processes of a lane send one alert and one recovery between them, and
// mailspool_runs the worker processes that started, so that a worker
// restarting over and over can be told (package alert).
var SharedTables = []string{
	`CREATE TABLE IF NOT EXISTS mailspool_alerts (
  lane        VARCHAR(64) NOT NULL,
  cond        VARCHAR(32) NOT NULL,
  seen_at     BIGINT NOT NULL DEFAULT 0,
  notified    INT NOT NULL DEFAULT 0,
  since       BIGINT NOT NULL DEFAULT 0,
  lease_until BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (lane, cond)
)`,
	`CREATE TABLE IF NOT EXISTS mailspool_runs (
  lane       VARCHAR(64) NOT NULL,
  worker     VARCHAR(64) NOT NULL,
  started_at BIGINT NOT NULL,
  seen_at    BIGINT NOT NULL,
  clean      INT NOT NULL DEFAULT 0,
  PRIMARY KEY (lane, worker)
)`,
}

// lanesTable holds lane-wide state that every worker process reads: an
// operator's pause, a breaker's hold.
const lanesTable = "mailspool_lanes"

// Migrate creates or upgrades the tables of the given lane tables
// (DefaultTable when none is given) to SchemaVersion. It is idempotent, and
// safe to re-run after an interruption. The version of each lane table is
// kept in the mailspool_schema table.
//
// Each step of a lane table's schema is done whole or not at all on
// PostgreSQL and SQLite (one transaction with the record of its version);
// on MySQL/MariaDB, where DDL commits by itself, a step's statements are
// each safe to repeat and its version is recorded after the last, so the
// next Migrate re-runs a step cut short. Before any DDL, a table or index
// of the name Migrate would create that is not mailspool's stops it, with
// nothing changed (see internal/ddl).
func Migrate(ctx context.Context, db *sql.DB, tables ...string) error {
	return migrate(ctx, db, nil, tables...)
}

// stepHook is called before statement stmt of step version of table, and
// with stmt == the step's statement count before the version is recorded;
// an error stops the migration there. Tests use it to cut a migration
// short at every point.
type stepHook func(table string, version, stmt int) error

func migrate(ctx context.Context, db *sql.DB, hook stepHook, tables ...string) error {
	d, err := detectDialect(ctx, db)
	if err != nil {
		return err
	}
	store := d.store()
	if len(tables) == 0 {
		tables = []string{DefaultTable}
	}
	for _, t := range tables {
		if err := validTable(t); err != nil {
			return err
		}
	}
	if err := distinctTables(tables); err != nil {
		return err
	}
	// Everything is checked before anything is created.
	shared := append([]string{createSchemaTable(d)}, SharedTables...)
	if err := ddl.Conflicts(ctx, db, store, shared, nil); err != nil {
		return fmt.Errorf("queue: migrate: %w", err)
	}
	current := make([]int, len(tables))
	for i, table := range tables {
		if current[i], err = recordedVersion(ctx, db, d, table); err != nil {
			return err
		}
		if current[i] > SchemaVersion() {
			return fmt.Errorf("queue: migrate: table %s is at schema version %d, newer than this program's %d; upgrade mailspool", table, current[i], SchemaVersion())
		}
		var all, pending []string
		for _, m := range migrations {
			stmts := migrationSQL(d, m, table)
			all = append(all, stmts...)
			if m.version > current[i] {
				pending = append(pending, stmts...)
			}
		}
		if err := ddl.Conflicts(ctx, db, store, pending, ddl.Columns(all)); err != nil {
			return fmt.Errorf("queue: migrate %s: %w", table, err)
		}
	}
	for _, stmt := range shared {
		if err := ddl.Run(ctx, db, store, ddl.Step{Stmts: []string{stmt}}); err != nil {
			return fmt.Errorf("queue: migrate: creating the shared tables: %w", err)
		}
	}
	for i, table := range tables {
		if err := migrateTable(ctx, db, d, table, current[i], hook); err != nil {
			return err
		}
	}
	return nil
}

func migrateTable(ctx context.Context, db *sql.DB, d dialect, table string, current int, hook stepHook) error {
	var upsert string
	if d.sqlite || d.postgres {
		upsert = `INSERT INTO ` + d.quote(schemaTable) + ` (tbl, version, applied_at) VALUES (?, ?, ?) ON CONFLICT (tbl) DO UPDATE SET version = excluded.version, applied_at = excluded.applied_at`
	} else {
		upsert = `INSERT INTO ` + d.quote(schemaTable) + ` (tbl, version, applied_at) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE version = VALUES(version), applied_at = VALUES(applied_at)`
	}
	for _, m := range migrations {
		if m.version <= current {
			continue
		}
		stmts := migrationSQL(d, m, table)
		if m.addsColumn != "" {
			has, err := hasColumn(ctx, db, d, table, m.addsColumn)
			if err != nil {
				return err
			}
			if has {
				stmts = nil
			}
		}
		step := ddl.Step{
			Stmts: stmts,
			Done:  alreadyThere,
			Record: func(ctx context.Context, ex ddl.Execer) error {
				if _, err := ex.ExecContext(ctx, d.rebind(upsert), table, m.version, time.Now().UnixMilli()); err != nil {
					return fmt.Errorf("recording version %d: %w", m.version, err)
				}
				return nil
			},
		}
		if hook != nil {
			step.Before = func(i int) error { return hook(table, m.version, i) }
		}
		if err := ddl.Run(ctx, db, d.store(), step); err != nil {
			return fmt.Errorf("queue: migrate %s to version %d: %w", table, m.version, err)
		}
	}
	return nil
}

// migrationSQL is m's statements for table in dialect d.
func migrationSQL(d dialect, m migration, table string) []string {
	stmts := m.mysql
	switch {
	case d.sqlite:
		stmts = m.sqlite
	case d.postgres:
		stmts = m.postgres
	}
	out := make([]string, len(stmts))
	for i, s := range stmts {
		out[i] = fmt.Sprintf(s, d.quote(table), d.quote(table+"_limits"), table, d.quote(lanesTable), d.quote(table+"_bodies"), d.quote(table+"_files"))
	}
	return out
}

// alreadyThere reports whether a migration statement failed because an
// earlier, interrupted run already added its column or key (neither MySQL
// nor SQLite has ADD COLUMN IF NOT EXISTS).
func alreadyThere(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "duplicate column name") || strings.Contains(s, "duplicate key name")
}

// hasColumn reports whether table has column.
func hasColumn(ctx context.Context, db *sql.DB, d dialect, table, column string) (bool, error) {
	var n int
	var err error
	switch {
	case d.sqlite:
		err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?`, table, column).Scan(&n)
	case d.postgres:
		err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2`, table, column).Scan(&n)
	default:
		err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ? AND column_name = ?`, table, column).Scan(&n)
	}
	if err != nil {
		return false, fmt.Errorf("queue: migrate: looking for column %s of %s: %w", column, table, err)
	}
	return n > 0, nil
}

// errCaseOnly is in the error of a table whose name mailspool_schema
// records with another case.
var errCaseOnly = errors.New("differs only in case")

// schemaVersionOf returns the version mailspool_schema records for table,
// 0 for none.
//
// On MySQL and MariaDB the record's name is compared without case (the
// column's collation), but on Linux their table names are compared with
// it: the record of a lane table mail would answer for a table MAIL that
// is the application's own, and migrate would take that table for an
// upgraded lane, cleanup delete from it. So a record must name table
// exactly. Names that differ only in case are one lane's name to
// mailspool, as within one configuration (distinctTables).
func schemaVersionOf(ctx context.Context, db *sql.DB, d dialect, table string) (int, error) {
	var v int
	var recorded string
	err := db.QueryRowContext(ctx, d.rebind(`SELECT tbl, version FROM `+d.quote(schemaTable)+` WHERE tbl = ?`), table).Scan(&recorded, &v)
	if err == sql.ErrNoRows {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("queue: reading the schema version of %s: %w", table, err)
	}
	if recorded != table {
		return 0, fmt.Errorf("queue: table %s: %s records the lane table %s, whose name %w; mailspool takes names that differ only in case for one table, so name the lane's table %s, or give it a name that differs by more than case", table, schemaTable, recorded, errCaseOnly, recorded)
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
	if errors.Is(err, errCaseOnly) {
		return err
	}
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("queue: checking the schema of %s: %w", table, ctx.Err()) // stopped, not missing
	}
	if err != nil {
		// Most likely mailspool_schema does not exist yet.
		return fmt.Errorf("queue: table %s has no schema version (run 'mailspool migrate'): %w", table, err)
	}
	if v != SchemaVersion() {
		return fmt.Errorf("queue: table %s is at schema version %d, this program needs %d: run 'mailspool migrate'", table, v, SchemaVersion())
	}
	return nil
}

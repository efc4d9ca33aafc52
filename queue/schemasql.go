package queue

import (
	"context"
	"database/sql"
	"fmt"
)

// SchemaSQL returns the statements that bring table from schema version
// from (0: the table does not exist) to SchemaVersion on store, "mysql"
// (MySQL and MariaDB), "postgres" or "sqlite": the statements Migrate runs, ending with
// the shared tables (SharedTables) and the ones that record the version in
// mailspool_schema, so that CheckSchema and Migrate accept the result. It is
// for an application that applies its schema with its own tool (goose,
// atlas, golang-migrate).
func SchemaSQL(store, table string, from int) ([]string, error) {
	var d dialect
	switch store {
	case "mysql":
	case "postgres":
		d.postgres = true
	case "sqlite":
		d.sqlite = true
	default:
		return nil, fmt.Errorf("queue: unknown store %q (want mysql, postgres or sqlite)", store)
	}
	if err := validTable(table); err != nil {
		return nil, err
	}
	if from < 0 || from > SchemaVersion() {
		return nil, fmt.Errorf("queue: schema version %d out of range 0..%d", from, SchemaVersion())
	}
	var out []string
	for _, m := range migrations {
		if m.version > from {
			out = append(out, migrationSQL(d, m, table)...)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	record := fmt.Sprintf(`INSERT INTO %s (tbl, version, applied_at) VALUES ('%s', %d, UNIX_TIMESTAMP() * 1000)
  ON DUPLICATE KEY UPDATE version = VALUES(version), applied_at = VALUES(applied_at)`, d.quote(schemaTable), table, SchemaVersion())
	switch {
	case d.sqlite:
		record = fmt.Sprintf(`INSERT INTO %s (tbl, version, applied_at) VALUES ('%s', %d, CAST(strftime('%%s', 'now') AS INTEGER) * 1000)
  ON CONFLICT (tbl) DO UPDATE SET version = excluded.version, applied_at = excluded.applied_at`, d.quote(schemaTable), table, SchemaVersion())
	case d.postgres:
		record = fmt.Sprintf(`INSERT INTO %s (tbl, version, applied_at) VALUES ('%s', %d, CAST(EXTRACT(EPOCH FROM now()) * 1000 AS BIGINT))
  ON CONFLICT (tbl) DO UPDATE SET version = excluded.version, applied_at = excluded.applied_at`, d.quote(schemaTable), table, SchemaVersion())
	}
	// The shared tables (alerts, runs) are created IF NOT EXISTS: harmless
	// to repeat for every lane.
	out = append(out, SharedTables...)
	return append(out, createSchemaTable(d), record), nil
}

// createSchemaTable is the statement that creates mailspool_schema.
func createSchemaTable(d dialect) string {
	return `CREATE TABLE IF NOT EXISTS ` + d.quote(schemaTable) + ` (tbl VARCHAR(64) NOT NULL PRIMARY KEY, version INT NOT NULL, applied_at BIGINT NOT NULL)`
}

// TableVersion returns the schema version of table as recorded in
// mailspool_schema: 0 when it was never migrated.
func TableVersion(ctx context.Context, db *sql.DB, table string) (int, error) {
	d, err := detectDialect(ctx, db)
	if err != nil {
		return 0, err
	}
	return recordedVersion(ctx, db, d, table)
}

// recordedVersion is TableVersion in dialect d: it creates nothing.
func recordedVersion(ctx context.Context, db *sql.DB, d dialect, table string) (int, error) {
	var exists int
	q := `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?`
	switch {
	case d.sqlite:
		q = `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?`
	case d.postgres:
		q = `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = $1`
	}
	if err := db.QueryRowContext(ctx, q, schemaTable).Scan(&exists); err != nil {
		return 0, fmt.Errorf("queue: looking for %s: %w", schemaTable, err)
	}
	if exists == 0 {
		return 0, nil
	}
	return schemaVersionOf(ctx, db, d, table)
}

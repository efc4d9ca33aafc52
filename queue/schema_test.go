package queue

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/transport"
)

// TestCompletionColumnsAreFixedWidth checks that every column a claim or a
// sent completion writes is NOT NULL and fixed-width on MySQL/MariaDB, so
// InnoDB updates the row in place instead of rewriting it with its bodies
// (about 11 KB of redo per mail instead of 1 KB, measured with mailspool
// bench).
func TestCompletionColumnsAreFixedWidth(t *testing.T) {
	s := newMariaDBStore(t)
	ctx := context.Background()
	rows, err := s.db.QueryContext(ctx, `SELECT column_name, data_type, is_nullable, COALESCE(character_set_name, '')
  FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ?`, DefaultTable)
	require.NoError(t, err)
	defer rows.Close()
	got := map[string]string{}
	for rows.Next() {
		var name, typ, nullable, charset string
		require.NoError(t, rows.Scan(&name, &typ, &nullable, &charset))
		got[name] = typ + " " + nullable + " " + charset
	}
	require.NoError(t, rows.Err())
	fixed := map[string]bool{"tinyint": true, "smallint": true, "int": true, "bigint": true}
	for _, col := range []string{"status", "attempts", "crashes", "next_run", "locked_until", "locked_by",
		"sent_at", "last_kind", "maybe_delivered", "provider_id"} {
		def, ok := got[col]
		require.True(t, ok, "column %s missing", col)
		var typ, nullable, charset string
		parts := strings.Fields(def + " -")
		typ, nullable, charset = parts[0], parts[1], parts[2]
		assert.Equal(t, "NO", nullable, "%s must be NOT NULL", col)
		assert.True(t, fixed[typ] || (typ == "char" && charset == "ascii"), "%s is %s: want an integer or CHAR ... CHARACTER SET ascii", col, def)
	}

	// A provider id reads back as written (CHAR pads, the server trims).
	q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
	id, err := q.Enqueue(ctx, s.db, testMessage("kim@example.com"))
	require.NoError(t, err)
	_, err = s.db.Exec(rebindFor(t, s.db, `UPDATE `+q.table+` SET provider_id = ? WHERE id = ?`), "0100018c-abc@email.amazonses.com", id)
	require.NoError(t, err)
	assert.Equal(t, "0100018c-abc@email.amazonses.com", readRow(t, q, id).ProviderID)
}

// TestMigrateAddsLastRule upgrades a table made before last_rule existed,
// and re-runs the step as after an interruption (the column there, the
// version not yet recorded).
func TestMigrateAddsLastRule(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		d, err := detectDialect(ctx, s.db)
		require.NoError(t, err)
		// The table as version 1 made it.
		_, err = s.db.ExecContext(ctx, `ALTER TABLE `+d.quote(DefaultTable)+` DROP COLUMN last_rule`)
		require.NoError(t, err)
		_, err = s.db.ExecContext(ctx, rebindFor(t, s.db, `UPDATE `+d.quote(schemaTable)+` SET version = 1 WHERE tbl = ?`), DefaultTable)
		require.NoError(t, err)
		require.ErrorContains(t, CheckSchema(ctx, s.db, DefaultTable), "run 'mailspool migrate'")

		require.NoError(t, Migrate(ctx, s.db))
		require.NoError(t, CheckSchema(ctx, s.db, DefaultTable))
		require.Equal(t, 0, countRows(t, s.db, DefaultTable, "last_rule <> ''"))

		// Interrupted after the ALTER, before the version was recorded.
		_, err = s.db.ExecContext(ctx, rebindFor(t, s.db, `UPDATE `+d.quote(schemaTable)+` SET version = 1 WHERE tbl = ?`), DefaultTable)
		require.NoError(t, err)
		require.NoError(t, Migrate(ctx, s.db))
		require.NoError(t, CheckSchema(ctx, s.db, DefaultTable))
	})
}

// TestMigrateAddsLastScope upgrades a table made before last_scope
// existed (version 8): the column comes empty, and outcomes write it.
func TestMigrateAddsLastScope(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		d, err := detectDialect(ctx, s.db)
		require.NoError(t, err)
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
		enqueueN(t, q, 1)
		_, err = s.db.ExecContext(ctx, `ALTER TABLE `+d.quote(DefaultTable)+` DROP COLUMN last_scope`)
		require.NoError(t, err)
		_, err = s.db.ExecContext(ctx, rebindFor(t, s.db, `UPDATE `+d.quote(schemaTable)+` SET version = 8 WHERE tbl = ?`), DefaultTable)
		require.NoError(t, err)
		require.ErrorContains(t, CheckSchema(ctx, s.db, DefaultTable), "run 'mailspool migrate'")

		require.NoError(t, Migrate(ctx, s.db))
		require.NoError(t, CheckSchema(ctx, s.db, DefaultTable))
		require.Equal(t, 1, countRows(t, s.db, DefaultTable, "last_scope = ''"), "a row from before has no scope")

		tr := newFuncTransport(func(context.Context, *transport.Message) (transport.Receipt, error) {
			return transport.Receipt{}, &transport.Error{Kind: transport.Temporary, Scope: transport.ScopeSender, Code: 554, Rule: "smtp-sender-policy", Detail: "blocked using zen.spamhaus.org"}
		})
		w, err := NewWorker(q, tr, &WorkerOptions{Batch: 1, Concurrency: 1, Logger: quietLogger()})
		require.NoError(t, err)
		got, err := oneBatch(ctx, w, 1)
		require.NoError(t, err)
		require.Equal(t, 1, got)
		row, err := q.Row(ctx, 1)
		require.NoError(t, err)
		assert.Equal(t, "retry", row.Status)
		assert.Equal(t, "sender", row.LastScope)
		st, err := q.Stats(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 1, st.SenderScope, "a mail held up by our sender")

		// Interrupted after the ALTER, before the version was recorded.
		_, err = s.db.ExecContext(ctx, rebindFor(t, s.db, `UPDATE `+d.quote(schemaTable)+` SET version = 8 WHERE tbl = ?`), DefaultTable)
		require.NoError(t, err)
		require.NoError(t, Migrate(ctx, s.db))
		require.NoError(t, CheckSchema(ctx, s.db, DefaultTable))
	})
}

// TestSchemaColumnsAgree: the lane table has the same columns on every
// store, but for what one store keeps on its own (MySQL's to_hash, SQLite's
// body_id): a migration step written for two stores and forgotten on the
// third fails here.
func TestSchemaColumnsAgree(t *testing.T) {
	ctx := context.Background()
	columns := func(s store) []string {
		query := `SELECT column_name FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ?`
		switch s.name {
		case "sqlite":
			query = `SELECT name FROM pragma_table_info(?)`
		case "postgres":
			query = `SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1`
		}
		rows, err := s.db.QueryContext(ctx, query, DefaultTable)
		require.NoError(t, err)
		defer rows.Close()
		var cols []string
		for rows.Next() {
			var c string
			require.NoError(t, rows.Scan(&c))
			if c != "to_hash" && c != "body_id" {
				cols = append(cols, strings.ToLower(c))
			}
		}
		require.NoError(t, rows.Err())
		slices.Sort(cols)
		return cols
	}
	want := columns(newSQLiteStore(t))
	assert.Equal(t, want, columns(newMariaDBStore(t)), "MariaDB")
	assert.Equal(t, want, columns(newPostgresStore(t)), "PostgreSQL")
}

// TestRecordNamesItsTableExactly: on MariaDB (lower_case_table_names=0,
// the Linux default) mail and MAIL are two tables, but mailspool_schema
// compares its names without case. A lane whose table is the application's
// MAIL, beside a lane table mail, must not pass for migrated: migrate and
// the schema check refuse it, saying why, and the application's rows and
// the other lane's record stay as they were.
func TestRecordNamesItsTableExactly(t *testing.T) {
	s := newMariaDBStore(t)
	ctx := context.Background()
	var folded int
	require.NoError(t, s.db.QueryRowContext(ctx, `SELECT @@lower_case_table_names`).Scan(&folded))
	if folded != 0 {
		t.Skipf("lower_case_table_names=%d: the server folds table names, so mail and MAIL are one table and the case cannot arise", folded)
	}
	require.NoError(t, Migrate(ctx, s.db, "case_lane"))
	_, err := s.db.ExecContext(ctx, "CREATE TABLE `CASE_LANE` (id BIGINT PRIMARY KEY, status INT, next_run BIGINT, note TEXT)")
	require.NoError(t, err)
	_, err = s.db.ExecContext(ctx, "INSERT INTO `CASE_LANE` VALUES (1, 2, 0, 'the application''s own')")
	require.NoError(t, err)

	require.ErrorContains(t, Migrate(ctx, s.db, "CASE_LANE"), "differs only in case")
	require.ErrorContains(t, CheckSchema(ctx, s.db, "CASE_LANE"), "differs only in case")
	v, err := TableVersion(ctx, s.db, "CASE_LANE")
	require.ErrorContains(t, err, "differs only in case")
	require.Zero(t, v)

	require.Equal(t, 1, countRows(t, s.db, "`CASE_LANE`", "note = 'the application''s own'"))
	require.NoError(t, CheckSchema(ctx, s.db, "case_lane"))
	v, err = TableVersion(ctx, s.db, "case_lane")
	require.NoError(t, err)
	require.Equal(t, SchemaVersion(), v)
}

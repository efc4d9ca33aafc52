package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/internal/ddl"
)

// laneSchema is what a lane table's migration made: each of its tables'
// columns and indexes (the lane's name replaced by T, so that two lanes
// compare), and the version recorded.
type laneSchema struct {
	Version int
	Tables  map[string][]string
}

func snapshotLane(t *testing.T, s store, table string) laneSchema {
	t.Helper()
	ctx := context.Background()
	d, err := detectDialect(ctx, s.db)
	require.NoError(t, err)
	out := laneSchema{Tables: map[string][]string{}}
	out.Version, err = TableVersion(ctx, s.db, table)
	require.NoError(t, err)
	indexQuery := `SELECT DISTINCT index_name FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = ?`
	switch s.name {
	case "sqlite":
		indexQuery = `SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?`
	case "postgres":
		indexQuery = `SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = $1`
	}
	for _, suffix := range []string{"", "_limits", "_bodies", "_files"} {
		cols, err := ddl.TableColumns(ctx, s.db, d.store(), table+suffix)
		require.NoError(t, err)
		if cols == nil {
			continue
		}
		rows, err := s.db.QueryContext(ctx, indexQuery, table+suffix)
		require.NoError(t, err)
		for rows.Next() {
			var name string
			require.NoError(t, rows.Scan(&name))
			cols = append(cols, "index "+strings.ReplaceAll(strings.ToLower(name), table, "T"))
		}
		require.NoError(t, rows.Err())
		rows.Close()
		slices.Sort(cols)
		out.Tables["T"+suffix] = cols
	}
	return out
}

// TestMigrationCutShortAnywhere stops a lane's migration at every point
// of every step in turn — before each statement and before the version is
// recorded — and migrates again each time. On PostgreSQL the stop is the
// migration's connection killed by the server (pg_terminate_backend), on
// SQLite and MariaDB an error at that point (a process that died there).
// On PostgreSQL and SQLite each cut leaves the schema exactly as the last
// whole step left it (a clean migration's schema at that version, taken
// from another lane), with that version recorded: nothing half-done. On
// MariaDB, where DDL commits by itself, the recorded version is still the
// last whole step's, and the run after the last cut ends with the same
// schema as a migration never interrupted.
func TestMigrationCutShortAnywhere(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		d, err := detectDialect(ctx, s.db)
		require.NoError(t, err)

		// The reference: an uninterrupted migration, its schema seen at
		// the start of every step.
		at := map[int]laneSchema{}
		require.NoError(t, migrate(ctx, s.db, func(table string, version, stmt int) error {
			if stmt == 0 {
				at[previousVersion(version)] = snapshotLane(t, s, "ref")
			}
			return nil
		}, "ref"))
		final := snapshotLane(t, s, "ref")
		require.Equal(t, SchemaVersion(), final.Version)

		type point struct{ version, stmt int }
		var points []point
		for _, m := range migrations {
			for i := 0; i <= len(migrationSQL(d, m, "cut")); i++ {
				points = append(points, point{m.version, i})
			}
		}
		cut := errors.New("cut short")
		for _, p := range points {
			err := migrate(ctx, s.db, func(table string, version, stmt int) error {
				if table != "cut" || version != p.version || stmt != p.stmt {
					return nil
				}
				if s.name == "postgres" {
					killMigration(t, s.db)
					return nil
				}
				return cut
			}, "cut")
			require.Error(t, err, "cut at version %d, statement %d", p.version, p.stmt)
			got := snapshotLane(t, s, "cut")
			want := at[previousVersion(p.version)]
			if s.name == "mariadb" {
				assert.Equal(t, want.Version, got.Version, "the version recorded after a cut at version %d, statement %d", p.version, p.stmt)
				continue
			}
			assert.Equal(t, want, got, "the schema after a cut at version %d, statement %d (%v)", p.version, p.stmt, err)
		}
		require.NoError(t, Migrate(ctx, s.db, "cut"))
		assert.Equal(t, final, snapshotLane(t, s, "cut"), "the schema after the last cut and a whole run")
		require.NoError(t, CheckSchema(ctx, s.db, "cut"))
	})
}

func previousVersion(v int) int {
	prev := 0
	for _, m := range migrations {
		if m.version >= v {
			break
		}
		prev = m.version
	}
	return prev
}

// killMigration has the server end the connection that holds the
// migration's open transaction, and waits until it is gone.
func killMigration(t *testing.T, db *sql.DB) {
	t.Helper()
	ctx := context.Background()
	const q = `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()`
	var pid int
	require.NoError(t, db.QueryRowContext(ctx, q).Scan(&pid), "finding the migration's connection")
	var ok bool
	require.NoError(t, db.QueryRowContext(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&ok))
	require.True(t, ok)
	for {
		var n int
		require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&n))
		if n == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMigrateRefusesObjectsNotItsOwn: a table of a lane's name made by
// someone else (here the attachments table, which a step after the first
// creates IF NOT EXISTS and would have taken as it is), or on SQLite and
// PostgreSQL an index of the name a step creates but on another table,
// stops the migration before any DDL: no table of the lane, no version,
// and the foreign object untouched. Once it is gone, the migration makes
// the same schema as anywhere else.
func TestMigrateRefusesObjectsNotItsOwn(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		require.NoError(t, Migrate(ctx, s.db, "ref"))
		want := snapshotLane(t, s, "ref")
		exec := func(q string) {
			t.Helper()
			_, err := s.db.ExecContext(ctx, q)
			require.NoError(t, err)
		}
		nothing := func(table string) {
			t.Helper()
			got := snapshotLane(t, s, table)
			assert.Equal(t, 0, got.Version, "a version was recorded")
			for name := range got.Tables {
				if name != "T_files" {
					t.Errorf("%s was created", strings.Replace(name, "T", table, 1))
				}
			}
		}

		exec(`CREATE TABLE lane_files (id INTEGER NOT NULL, note VARCHAR(20) NOT NULL)`)
		err := Migrate(ctx, s.db, "lane")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "table lane_files exists and is not mailspool's")
		nothing("lane")
		assert.Equal(t, []string{"id", "note"}, snapshotLane(t, s, "lane").Tables["T_files"], "the foreign table changed")
		exec(`DROP TABLE lane_files`)
		require.NoError(t, Migrate(ctx, s.db, "lane"))
		assert.Equal(t, want, snapshotLane(t, s, "lane"))

		if s.name == "mariadb" {
			return // MySQL's index names belong to their table
		}
		exec(`CREATE TABLE other (x INTEGER NOT NULL)`)
		exec(`CREATE INDEX "lane2_idx_claim" ON other (x)`)
		err = Migrate(ctx, s.db, "lane2")
		require.Error(t, err)
		assert.Contains(t, err.Error(), fmt.Sprintf("index %s exists on table other", "lane2_idx_claim"))
		nothing("lane2")
		exec(`DROP INDEX "lane2_idx_claim"`)
		require.NoError(t, Migrate(ctx, s.db, "lane2"))
		assert.Equal(t, want, snapshotLane(t, s, "lane2"))
	})
}

package ddl_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/inbound"
	"github.com/mailspool/mailspool/internal/ddl"
	"github.com/mailspool/mailspool/internal/sqlstore"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/queue/dburl/dburltest"
	"github.com/mailspool/mailspool/suppress"
	"github.com/mailspool/mailspool/throttle"
	"github.com/mailspool/mailspool/transport/composite"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"
)

type store struct {
	name sqlstore.Name
	db   *sql.DB
}

// forEachStore runs f on a fresh, empty database of each store.
func forEachStore(t *testing.T, f func(t *testing.T, s store)) {
	open := func(t *testing.T, name sqlstore.Name, u string) store {
		db, err := dburl.Open(u)
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		return store{name, db}
	}
	t.Run("sqlite", func(t *testing.T) {
		f(t, open(t, sqlstore.SQLite, "sqlite:"+filepath.Join(t.TempDir(), "q.db")))
	})
	t.Run("mariadb", func(t *testing.T) { f(t, open(t, sqlstore.MySQL, dburltest.MariaDB.Fresh(t))) })
	t.Run("postgres", func(t *testing.T) { f(t, open(t, sqlstore.Postgres, dburltest.Postgres.Fresh(t))) })
}

func TestColumns(t *testing.T) {
	got := ddl.Columns([]string{
		"CREATE TABLE IF NOT EXISTS `t` (\n  id BIGINT NOT NULL,\n  note VARCHAR(9) NOT NULL DEFAULT '' COMMENT 'a, b (c), d''s',\n  PRIMARY KEY (id),\n  KEY k (note, id)\n) ENGINE=InnoDB",
		`CREATE TABLE s (a INT NOT NULL PRIMARY KEY, b DECIMAL(10, 2) NOT NULL, UNIQUE (a, b))`,
		`ALTER TABLE "t" ADD COLUMN IF NOT EXISTS extra TEXT, ADD COLUMN more INT`,
	})
	assert.Equal(t, map[string][]string{"t": {"id", "note", "extra", "more"}, "s": {"a", "b"}}, got)
}

// TestStepIsWholeOrNothing: a step whose third statement fails leaves
// nothing of the first two on PostgreSQL and SQLite, nor its record; on
// MariaDB, where each DDL statement commits, what ran stays (which is why
// every step there is written to run again).
func TestStepIsWholeOrNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		_, err := s.db.ExecContext(ctx, `CREATE TABLE versions (v INTEGER NOT NULL)`)
		require.NoError(t, err)
		broken := errors.New("stopped")
		err = ddl.Run(ctx, s.db, s.name, ddl.Step{
			Stmts: []string{`CREATE TABLE one (id INTEGER NOT NULL)`, `CREATE TABLE two (id INTEGER NOT NULL)`, `CREATE TABLE three (id INTEGER NOT NULL)`},
			Before: func(i int) error {
				if i == 2 {
					return broken
				}
				return nil
			},
			Record: func(ctx context.Context, ex ddl.Execer) error {
				_, err := ex.ExecContext(ctx, `INSERT INTO versions (v) VALUES (1)`)
				return err
			},
		})
		require.ErrorIs(t, err, broken)
		cols, err := ddl.TableColumns(ctx, s.db, s.name, "one")
		require.NoError(t, err)
		if s.name == sqlstore.MySQL {
			assert.NotNil(t, cols, "MariaDB commits each DDL statement")
		} else {
			assert.Nil(t, cols, "table one survived the failed step")
		}
		require.NoError(t, ddl.Run(ctx, s.db, s.name, ddl.Step{
			Stmts: []string{`CREATE TABLE IF NOT EXISTS one (id INTEGER NOT NULL)`, `CREATE TABLE IF NOT EXISTS two (id INTEGER NOT NULL)`},
			Record: func(ctx context.Context, ex ddl.Execer) error {
				_, err := ex.ExecContext(ctx, `INSERT INTO versions (v) VALUES (1)`)
				return err
			},
		}))
		var n int
		require.NoError(t, s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM versions`).Scan(&n))
		assert.Equal(t, 1, n, "the step was recorded once")
	})
}

// TestSharedTablesNotMailspoolsAreRefused: a suppression or events table
// someone else made under mailspool's name stops suppress.Migrate and
// inbound.Migrate before any DDL (they used to take it as it was, and
// failed at the first use), and is left untouched; once it is gone, they
// create theirs.
func TestSharedTablesNotMailspoolsAreRefused(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		for _, c := range []struct {
			table   string
			migrate func(context.Context, *sql.DB) error
		}{{suppress.Table, suppress.Migrate}, {inbound.Table, inbound.Migrate}, {throttle.KeysTable, throttle.Migrate}, {composite.MembersTable, composite.Migrate}} {
			_, err := s.db.ExecContext(ctx, `CREATE TABLE `+c.table+` (address VARCHAR(254) NOT NULL, note INTEGER NOT NULL)`)
			require.NoError(t, err)
			err = c.migrate(ctx, s.db)
			require.Error(t, err, c.table)
			assert.Contains(t, err.Error(), "table "+c.table+" exists and is not mailspool's")
			cols, err := ddl.TableColumns(ctx, s.db, s.name, c.table)
			require.NoError(t, err)
			assert.Equal(t, []string{"address", "note"}, cols)
			_, err = s.db.ExecContext(ctx, `DROP TABLE `+c.table)
			require.NoError(t, err)
			require.NoError(t, c.migrate(ctx, s.db))
			require.NoError(t, c.migrate(ctx, s.db), "a second run")
		}
	})
}

// TestNoLaneTakesASharedTable: the suppression list's and the events'
// tables are among the names a lane's table may not have (a lane table
// mailspool_events used to be created by queue.Migrate, and then taken by
// inbound.Migrate's CREATE TABLE IF NOT EXISTS as its own).
func TestNoLaneTakesASharedTable(t *testing.T) {
	for _, name := range []string{suppress.Table, suppress.BypassTable, inbound.Table, throttle.KeysTable, throttle.SlotsTable, composite.MembersTable, composite.PinsTable} {
		assert.Contains(t, queue.OwnTables, name)
		assert.ErrorContains(t, queue.Lane{Table: name}.Validate(), "one of mailspool's own tables", name)
	}
}

package bench

import (
	"context"
	"database/sql"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/stretchr/testify/require"
)

// small is a quick run's options on url.
func small(url string) Options {
	return Options{DB: url, Workers: 1, Producers: 1, Messages: 20, PollInterval: 20 * time.Millisecond}
}

func tablesOf(t *testing.T, db *sql.DB) []string {
	t.Helper()
	tables, err := listTables(context.Background(), db)
	require.NoError(t, err)
	return slices.Sorted(maps.Keys(tables))
}

// TestRunNeverDropsWhatItDidNotCreate: a lane table with pending mail, an
// application's table and a lane whose table is gone but still migrated
// are each refused as --table, and are intact afterwards; a run on a
// fresh table then leaves the database as it found it.
func TestRunNeverDropsWhatItDidNotCreate(t *testing.T) {
	for name, newDB := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			url := newDB(t)
			db, err := dburl.Open(url)
			require.NoError(t, err)
			defer db.Close()
			require.NoError(t, queue.Migrate(ctx, db, "mail_queue", "orders"))
			q, err := queue.New(ctx, db, queue.Lane{Table: "mail_queue"}, nil)
			require.NoError(t, err)
			require.NoError(t, inTx(ctx, db, func(tx *sql.Tx) error {
				_, err := q.Enqueue(ctx, tx, message("pending", 0))
				return err
			}))
			for _, stmt := range []string{
				`CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL)`,
				`INSERT INTO customers VALUES (1, 'Ann')`,
				`DROP TABLE orders`, // still recorded in mailspool_schema
				`DROP TABLE orders_limits`,
				`DROP TABLE IF EXISTS orders_bodies`,
				`DROP TABLE IF EXISTS orders_files`,
			} {
				_, err := db.Exec(stmt)
				require.NoError(t, err, stmt)
			}
			before := tablesOf(t, db)

			for table, want := range map[string]string{
				"mail_queue":       "table mail_queue exists and was not created by mailspool bench",
				"customers":        "table customers exists and was not created by mailspool bench",
				"orders":           "a lane migrated in this database (lane table orders)",
				"mailspool_schema": "mailspool's own tables",
				"mailspool_lanes":  "mailspool's own tables",
			} {
				o := small(url)
				o.Table = table
				_, err := Run(ctx, o)
				require.ErrorContains(t, err, want, table)
			}
			o := small(url)
			o.Table, o.Algorithm = "mail", Both // mail_classic, mail_limits, ...: all free
			results, err := Run(ctx, o)
			require.NoError(t, err)
			require.Len(t, results, 2)
			require.Equal(t, "mail", results[1].Table)

			var status, n int
			require.NoError(t, db.QueryRow(`SELECT status FROM mail_queue`).Scan(&status))
			require.Equal(t, queue.StatusPending, status, "the lane's pending mail is still pending")
			require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM customers WHERE name = 'Ann'`).Scan(&n))
			require.Equal(t, 1, n, "the application's row is there")
			require.NoError(t, queue.CheckSchema(ctx, db, "mail_queue"))
			require.Equal(t, before, tablesOf(t, db), "the run left no table behind")
			require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM mailspool_schema WHERE tbl = 'mail'`).Scan(&n))
			require.Zero(t, n, "the run's lane is forgotten")
		})
	}
}

// TestRunLeavesNothingBehind: without --table and --keep a run on an
// empty database leaves it empty, and without a database its temporary
// SQLite file is gone; with Keep the tables stay and a later run may use
// them, since they carry the mark.
func TestRunLeavesNothingBehind(t *testing.T) {
	for name, newDB := range stores(t) {
		t.Run(name, func(t *testing.T) {
			url := newDB(t)
			o := small(url)
			o.Algorithm = Both
			o.History = 30
			results, err := Run(context.Background(), o)
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(results[0].Table, "mailspool_bench_"), results[0].Table)
			require.Contains(t, results[0].Line(), " table="+results[0].Table)
			db, err := dburl.Open(url)
			require.NoError(t, err)
			defer db.Close()
			require.Empty(t, tablesOf(t, db), "an empty database stays empty")

			o = small(url)
			o.Table, o.Keep = "kept", true
			_, err = Run(context.Background(), o)
			require.NoError(t, err)
			require.Contains(t, tablesOf(t, db), "kept")
			o.Keep = false
			_, err = Run(context.Background(), o)
			require.NoError(t, err, "a kept table carries the mark")
			for _, table := range tablesOf(t, db) {
				// The shared tables the kept run made stay: they were
				// there when this run started.
				require.True(t, strings.HasPrefix(table, "mailspool_") && !strings.HasPrefix(table, "mailspool_bench"), table)
			}
		})
	}
	t.Run("temporary file", func(t *testing.T) {
		tmp := t.TempDir()
		t.Setenv("TMPDIR", tmp)
		results, err := Run(context.Background(), small(""))
		require.NoError(t, err)
		require.Empty(t, results[0].DB, "a file removed is not named")
		entries, err := os.ReadDir(tmp)
		require.NoError(t, err)
		require.Empty(t, entries, "the temporary SQLite file is removed")

		o := small("")
		o.Keep = true
		results, err = Run(context.Background(), o)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(results[0].DB, "sqlite:"+tmp), results[0].DB)
		require.Contains(t, results[0].Line(), " db="+results[0].DB)
		_, err = os.Stat(strings.TrimPrefix(results[0].DB, "sqlite:"))
		require.NoError(t, err, "--keep keeps the file")
	})
}

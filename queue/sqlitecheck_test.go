package queue

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNewChecksTheSQLiteHandle: a handle that would fail under concurrency
// (no busy timeout, deferred transactions) is refused with an error saying
// how to open it; the dburl handle is accepted.
func TestNewChecksTheSQLiteHandle(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	for dsn, want := range map[string]string{
		"file:" + path: "no busy timeout and deferred transactions",
		"file:" + path + "?_pragma=busy_timeout(5000)":                  "deferred transactions",
		"file:" + path + "?_txlock=immediate":                           "no busy timeout",
		"file:" + path + "?_pragma=busy_timeout(5000)&_txlock=deferred": "deferred transactions",
	} {
		db, err := sql.Open("sqlite", dsn)
		require.NoError(t, err)
		_, err = New(ctx, db, Lane{}, nil)
		db.Close()
		require.Error(t, err, dsn)
		assert.Contains(t, err.Error(), want, dsn)
		assert.Contains(t, err.Error(), "dburl.Open", dsn)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_txlock=immediate")
	require.NoError(t, err)
	defer db.Close()
	_, err = New(ctx, db, Lane{}, nil)
	require.NoError(t, err)
	_, err = New(ctx, newSQLiteStore(t).db, Lane{}, nil)
	require.NoError(t, err)
}

// TestTableNamesNeverCollide: a lane table may not be mailspool's own table
// or look like another lane's rate-limit table, and Migrate refuses two
// names that are one table (SQLite ignores the case of table names).
func TestTableNamesNeverCollide(t *testing.T) {
	db := newSQLiteStore(t).db
	for _, table := range []string{"mailspool_schema", "MAILSPOOL_LANES", "mail_queue_limits", "Mail_LIMITS"} {
		_, err := New(context.Background(), db, Lane{Table: table}, nil)
		assert.Error(t, err, table)
		assert.Error(t, Migrate(context.Background(), db, table), table)
	}
	err := Migrate(context.Background(), db, "t_a", "T_A")
	assert.ErrorContains(t, err, "are the same table")
}

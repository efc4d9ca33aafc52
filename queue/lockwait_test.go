package queue

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEnqueueBoundedUnderTableLock: while another session holds the queue
// tables (LOCK TABLES ... WRITE on MariaDB, a write transaction on SQLite),
// an enqueue gives up after its bound with a clear error and writes
// nothing; it used to wait for the server's lock_wait_timeout (a day).
func TestEnqueueBoundedUnderTableLock(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		db := s.db
		if s.name == "sqlite" {
			// The dburl handle waits 10 s; this one 1 s.
			path := strings.TrimPrefix(s.url, "sqlite:")
			var err error
			db, err = sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(1000)&_txlock=immediate")
			require.NoError(t, err)
			defer db.Close()
		}
		if s.name == "postgres" {
			// The connection's lock_timeout bounds the wait there.
			db = s.openWith(t, "lock_timeout=1s")
		}
		q, err := New(ctx, db, Lane{RecipientLimit: SignupRecipientLimit, LockTimeout: time.Second}, nil)
		require.NoError(t, err)

		holder, err := s.db.Conn(ctx)
		require.NoError(t, err)
		defer holder.Close()
		switch s.name {
		case "sqlite":
			_, err = holder.ExecContext(ctx, "BEGIN IMMEDIATE")
		case "postgres":
			_, err = holder.ExecContext(ctx, "BEGIN")
			require.NoError(t, err)
			_, err = holder.ExecContext(ctx, "LOCK TABLE "+q.table+", "+q.limits+" IN ACCESS EXCLUSIVE MODE")
		default:
			_, err = holder.ExecContext(ctx, "LOCK TABLES "+q.table+" WRITE, "+q.limits+" WRITE")
		}
		require.NoError(t, err)

		_, err = q.Enqueue(ctx, db, testMessage("ann@example.com"))
		require.Error(t, err)
		if s.name == "mariadb" {
			assert.Contains(t, err.Error(), "waited more than 1s for a lock")
		}
		if s.name == "postgres" {
			assert.Contains(t, err.Error(), "waited more than its lock_timeout for a lock")
		}
		if s.name != "mariadb" {
			_, err = holder.ExecContext(ctx, "ROLLBACK")
		} else {
			_, err = holder.ExecContext(ctx, "UNLOCK TABLES")
		}
		require.NoError(t, err)
		assert.Equal(t, 0, countRows(t, s.db, q.table, "1=1"), "nothing was written")
		assert.Equal(t, 0, countRows(t, s.db, q.limits, "1=1"), "no limit was counted")
	})
}

func TestLockTimeoutOption(t *testing.T) {
	db := newSQLiteStore(t).db
	for _, d := range []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond, -time.Second} {
		_, err := New(context.Background(), db, Lane{LockTimeout: d}, nil)
		assert.ErrorContains(t, err, "lock timeout", d)
	}
}

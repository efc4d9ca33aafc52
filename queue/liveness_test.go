package queue

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runUntilReturn runs w until Run returns on its own and returns its error;
// the test fails if Run makes no such decision within limit.
func runUntilReturn(t *testing.T, w *Worker, limit time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { done <- w.Run(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		cancel()
		<-done
		t.Fatalf("Run did not give up within %v", limit)
		return nil
	}
}

// TestWorkerOnAReadOnlyStoreBacksOffAndGivesUp: every claim fails; the
// worker backs off exponentially and, after FailAfter of nothing but
// failures, Run returns an error (mailspool worker then exits non-zero).
func TestWorkerOnAReadOnlyStoreBacksOffAndGivesUp(t *testing.T) {
	s := newSQLiteStore(t)
	enqueueN(t, newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil), 3)
	path := strings.TrimPrefix(s.url, "sqlite:")
	ro, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(100)&_txlock=immediate")
	require.NoError(t, err)
	t.Cleanup(func() { ro.Close() })
	var problems problemLog
	w, err := NewWorker(newQueue(t, ro, Lane{RecipientLimit: NoLimit}, nil), newFuncTransport(nil),
		&WorkerOptions{PollInterval: 50 * time.Millisecond, FailAfter: 2 * time.Second, CleanupInterval: -1, Logger: problems.logger()})
	require.NoError(t, err)
	start := time.Now()
	err = runUntilReturn(t, w, time.Minute)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "giving up")
	assert.Contains(t, err.Error(), "readonly")
	assert.GreaterOrEqual(t, time.Since(start), 2*time.Second)
	claims := 0
	for _, l := range problems.Lines() {
		if strings.Contains(l, "claim failed") {
			claims++
		}
	}
	// 50ms, 100ms, 200ms, ... : about 6 claims in 2 s, not one every poll (40).
	assert.LessOrEqual(t, claims, 10, "claims back off")
	assert.GreaterOrEqual(t, claims, 3)
}

// TestWorkerNoticesItsSQLiteFileReplacedOrDeleted: a worker whose file was
// replaced (a restore) or deleted would write to a file nobody reads; it
// returns an error instead.
func TestWorkerNoticesItsSQLiteFileReplacedOrDeleted(t *testing.T) {
	for _, how := range []string{"replaced", "deleted", "overwritten"} {
		t.Run(how, func(t *testing.T) {
			s := newSQLiteStore(t)
			q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
			enqueueN(t, q, 2)
			w, err := NewWorker(q, newFuncTransport(nil), &WorkerOptions{PollInterval: 20 * time.Millisecond, CleanupInterval: -1, Logger: quietLogger()})
			require.NoError(t, err)
			path := strings.TrimPrefix(s.url, "sqlite:")
			go func() {
				for countRows(t, s.db, q.table, "status = 2") < 2 {
					time.Sleep(10 * time.Millisecond)
				}
				if how == "deleted" {
					assert.NoError(t, os.Remove(path))
					return
				}
				time.Sleep(2 * time.Millisecond) // another migration time
				fresh := newSQLiteStore(t)       // a new, migrated file
				freshPath := strings.TrimPrefix(fresh.url, "sqlite:")
				if how == "replaced" { // moved over the old one
					assert.NoError(t, os.Rename(freshPath, path))
					return
				}
				// Copied over the old one in place (cp other.db app.db):
				// the same inode, other content.
				_, err := fresh.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
				assert.NoError(t, err)
				_, err = s.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
				assert.NoError(t, err)
				content, err := os.ReadFile(freshPath)
				assert.NoError(t, err)
				assert.NoError(t, os.WriteFile(path, content, 0o600))
			}()
			err = runUntilReturn(t, w, time.Minute)
			require.Error(t, err)
			assert.Contains(t, err.Error(), filepath.Base(path))
			switch how {
			case "deleted":
				assert.Contains(t, err.Error(), "is gone")
			case "replaced":
				assert.Contains(t, err.Error(), "was replaced since")
			default:
				assert.Contains(t, err.Error(), "was replaced (overwritten in place)")
			}
		})
	}
}

package queue

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const childDBEnv = "MAILSPOOL_TEST_CHILD_DB"

// TestKilledWorkerLosesNothing runs a worker in a real subprocess, kills it
// with SIGKILL while its sends are in flight, and checks that another
// worker sends every one of its rows once the lease has expired.
func TestKilledWorkerLosesNothing(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		lane := Lane{RecipientLimit: NoLimit}
		q := newQueue(t, s.db, lane, nil)
		ids := enqueueN(t, q, 10)

		cmd := exec.Command(os.Args[0], "-test.run=^TestKilledWorkerChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), childDBEnv+"="+s.url)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		require.NoError(t, cmd.Start())
		require.Eventually(t, func() bool {
			return countRows(t, s.db, q.table, "status = 1 AND locked_by LIKE 'child.%'") == 10
		}, 20*time.Second, 20*time.Millisecond, "the child claimed the rows")
		claimedAt := time.Now()
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()

		tr := newFuncTransport(nil)
		w, err := NewWorker(q, tr, &WorkerOptions{ID: "rescuer", PollInterval: 100 * time.Millisecond, Logger: quietLogger()})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); w.Run(ctx) }()
		require.Eventually(t, func() bool { return countRows(t, s.db, q.table, "status = 2") == 10 }, 30*time.Second, 50*time.Millisecond)
		cancel()
		<-done

		assert.GreaterOrEqual(t, time.Since(claimedAt), 4*time.Second, "rows were taken over only after the child's lease (5s) ran out")
		assert.Len(t, tr.sends, 10, "each row sent once by the rescuer")
		for _, id := range ids {
			assert.Equal(t, 2, readRow(t, q, id).Attempts, "the killed attempt counts")
		}
	})
}

// TestKilledWorkerChild is the subprocess of TestKilledWorkerLosesNothing:
// a worker whose sends hang until it is killed.
func TestKilledWorkerChild(t *testing.T) {
	url := os.Getenv(childDBEnv)
	if url == "" {
		return // only runs as the child process
	}
	db, err := dburl.Open(url)
	require.NoError(t, err)
	q := newQueue(t, db, Lane{RecipientLimit: NoLimit}, nil)
	hang := newFuncTransport(func(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
		<-ctx.Done()
		return transport.Receipt{}, ctx.Err()
	})
	// Lease: (one round of 2s sends + one round for a previous batch) + 1s margin = 5s.
	w, err := NewWorker(q, hang, &WorkerOptions{ID: "child", Batch: 10, Concurrency: 10, SendTimeout: 2 * time.Second, LeaseMargin: time.Second, Logger: quietLogger()})
	require.NoError(t, err)
	w.Run(context.Background())
}

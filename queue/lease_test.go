package queue

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHeartbeatKeepsTheLeaseOfALongSend: sends take three times the lease;
// the heartbeat renews it, so the rescuer of a second worker never takes
// the rows over, and each mail is sent once.
func TestHeartbeatKeepsTheLeaseOfALongSend(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
		enqueueN(t, q, 4)
		tr := newFuncTransport(func(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
			select {
			case <-time.After(6 * time.Second):
				return transport.Receipt{MessageID: m.MessageID}, nil
			case <-ctx.Done():
				return transport.Receipt{}, ctx.Err()
			}
		})
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		defer wg.Wait() // even when the test fails early: no worker outlives it
		defer cancel()
		var workers []*Worker
		for _, id := range []string{"a", "b"} {
			w, err := NewWorker(newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil), tr, &WorkerOptions{ID: id, Batch: 4, Concurrency: 4,
				LeaseMargin: 2 * time.Second, RescueInterval: 50 * time.Millisecond, PollInterval: 50 * time.Millisecond, CleanupInterval: -1, Logger: quietLogger()})
			require.NoError(t, err)
			workers = append(workers, w)
			wg.Add(1)
			go func() { defer wg.Done(); assert.NoError(t, w.Run(ctx)) }()
		}
		waitProgress(t, "sent", 20*time.Second, 4, func() int { return countRows(t, s.db, q.table, "status = 2") })
		cancel()
		wg.Wait()
		assert.EqualValues(t, 4, tr.total.Load(), "sent once each")
		for _, w := range workers {
			assert.Zero(t, w.Stats().Rescued)
			assert.Zero(t, w.Stats().Stale)
		}
		assert.Equal(t, 4, countRows(t, s.db, q.table, "crashes = 0 AND maybe_delivered = 0"))
	})
}

// TestDefaultLeaseBringsAKilledWorkersRowsBackWithin30s: with the default
// options a killed worker's rows are due again within LeaseMargin +
// RescueInterval, whatever the send timeout.
func TestDefaultLeaseBringsAKilledWorkersRowsBackWithin30s(t *testing.T) {
	var o WorkerOptions
	require.NoError(t, o.setDefaults())
	assert.LessOrEqual(t, o.LeaseMargin+o.RescueInterval, 30*time.Second)
	assert.GreaterOrEqual(t, o.FailAfter, 5*time.Minute, "a database pause this long loses nothing")
}

package queue

import (
	"context"
	"strconv"
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

// TestRescuerGivesAnExpiredLeaseTimeToBeRenewed: the rescuer takes a lease
// only once it has stayed expired for a LeaseMargin. An owner that
// renews within that time (as one does whose renewal waited behind a
// database pause) keeps its rows; a lease nobody renews is rescued, but not
// sooner.
func TestRescuerGivesAnExpiredLeaseTimeToBeRenewed(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		// The owner renews 300 ms after the rescuer starts. On a machine so
		// loaded that the renewal comes a whole margin later, the rescue
		// would be right and the round proves nothing: it is run again, on
		// a table of its own, with twice the margin.
		for i, margin := 0, 3*time.Second; ; i, margin = i+1, 2*margin {
			if rescuerGivesTime(t, s, "mail_lease_"+strconv.Itoa(i), margin) {
				return
			}
			require.Less(t, margin, 20*time.Second, "the renewal never came within the rescuer's margin")
		}
	})
}

// rescuerGivesTime is one round of TestRescuerGivesAnExpiredLeaseTimeToBeRenewed
// on table with margin; false when the owner's renewal came too late for
// the round to say anything.
func rescuerGivesTime(t *testing.T, s store, table string, margin time.Duration) bool {
	ctx := context.Background()
	require.NoError(t, Migrate(ctx, s.db, table))
	lane := Lane{Table: table, RecipientLimit: NoLimit}
	q := newQueue(t, s.db, lane, nil)
	enqueueN(t, q, 5)
	jobs, err := q.claim(ctx, "owner.1", 5, time.Minute, nil)
	require.NoError(t, err)
	require.Len(t, jobs, 5)
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.id
	}
	expire := func() {
		past := time.Now().Add(-time.Second).UnixMilli()
		_, err := s.db.Exec(rebindFor(t, s.db, `UPDATE `+q.table+` SET next_run = ?, locked_until = ? WHERE locked_by = 'owner.1'`), past, past)
		require.NoError(t, err)
	}
	held := func() int { return countRows(t, s.db, q.table, "status = 1 AND locked_by = 'owner.1'") }

	expire()
	tr := newFuncTransport(func(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
		return transport.Receipt{MessageID: m.MessageID}, nil
	})
	w, err := NewWorker(newQueue(t, s.db, lane, nil), tr, &WorkerOptions{ID: "rescuer", LeaseMargin: margin,
		RescueInterval: 20 * time.Millisecond, PollInterval: 50 * time.Millisecond, CleanupInterval: -1, Logger: quietLogger()})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	started := time.Now()
	go func() { defer wg.Done(); assert.NoError(t, w.Run(runCtx)) }()

	// Many rescue rounds have found the lease expired by now; none
	// may have taken it.
	time.Sleep(300 * time.Millisecond)
	before := held()
	n, err := q.extend(ctx, "owner.1", ids, time.Now().Add(time.Minute).UnixMilli())
	require.NoError(t, err)
	if late := time.Since(started); late >= margin {
		t.Logf("the renewal came %v after the rescuer started, past its margin of %v: again with twice the margin", late, margin)
		return false
	}
	require.Equal(t, 5, before, "rescued at first sight")
	require.Equal(t, 5, n, "the owner renews its lease")
	time.Sleep(margin + 500*time.Millisecond)
	require.Equal(t, 5, held(), "a renewed lease stays with its owner")
	require.Zero(t, w.Stats().Rescued)

	// Now the owner is gone for good.
	expired := time.Now()
	expire()
	waitProgress(t, "rescued", 20*time.Second, 1, func() int { return int(w.Stats().Rescued) })
	assert.GreaterOrEqual(t, time.Since(expired), margin, "rescued before the lease had stayed expired for a margin")
	waitProgress(t, "sent after the rescue", 20*time.Second, 5, func() int { return countRows(t, s.db, q.table, "status = 2") })
	assert.EqualValues(t, 5, tr.total.Load())
	return true
}

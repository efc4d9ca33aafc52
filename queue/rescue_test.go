package queue

import (
	"context"
	"testing"
	"time"

	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rescueAll runs one rescue round of q with no lease spared and returns how
// many rows it rescued.
func rescueAll(t *testing.T, q *Queue) int {
	t.Helper()
	n, blocked, err := q.rescue(context.Background(), maxBatchRows, nil, time.Minute)
	require.NoError(t, err)
	require.Empty(t, blocked)
	return n
}

// TestRescueOfRowsWithADeadline: two mails with a not-after deadline are
// claimed and their worker dies; by the time their lease has expired one
// deadline has passed and the other has not. The rescue fails the first as
// expired and puts the second back, due at once; both have their attempt
// given back and a crash counted.
func TestRescueOfRowsWithADeadline(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, clock)
		enqueue := func(to string, notAfter time.Time) int64 {
			id, err := q.Enqueue(ctx, s.db, testMessage(to), NotAfter(notAfter))
			require.NoError(t, err)
			return id
		}
		soon := enqueue("soon@example.com", clock.Now().Add(2*time.Minute))
		later := enqueue("later@example.com", clock.Now().Add(time.Hour))
		jobs, err := q.claim(ctx, "dead.1", 10, time.Minute, nil)
		require.NoError(t, err)
		require.Len(t, jobs, 2)

		clock.Advance(5 * time.Minute) // the lease and the first deadline have passed
		assert.Equal(t, 2, rescueAll(t, q))

		r := readRow(t, q, soon)
		assert.Equal(t, StatusFailed, r.Status, "past its deadline: not sent again")
		assert.Equal(t, kindExpired, r.LastKind)
		r = readRow(t, q, later)
		assert.Equal(t, StatusPending, r.Status, "its deadline is still ahead: sent again")
		assert.Equal(t, clock.Now().UnixMilli(), r.NextRun, "due at once")
		assert.Empty(t, r.LockedBy)
		for _, id := range []int64{soon, later} {
			r := readRow(t, q, id)
			assert.Equal(t, 0, r.Attempts, "the attempt is given back")
			assert.Equal(t, 1, r.Crashes)
			assert.Equal(t, 1, r.MaybeDelivered)
		}

		jobs, err = q.claim(ctx, "next.1", 10, time.Minute, nil)
		require.NoError(t, err)
		assert.Equal(t, []int64{later}, jobIDs(jobs), "only the mail still in time is claimed again")
	})
}

// TestHeartbeatOfALostLeaseChangesNothing: a worker's lease expires and
// its rows are rescued and claimed by another worker. The first worker's
// heartbeat, still running, must not touch them: it reports no row
// extended, and when the new owner dies in turn its lease still expires
// and the rows are rescued again.
func TestHeartbeatOfALostLeaseChangesNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, clock)
		ids := enqueueN(t, q, 3)

		jobs, err := q.claim(ctx, "first.1", 10, time.Minute, nil)
		require.NoError(t, err)
		require.Len(t, jobs, 3)
		clock.Advance(2 * time.Minute)
		require.Equal(t, 3, rescueAll(t, q))
		// Rescued rows that crashed once are suspects, leased together
		// apart from ordinary rows.
		jobs, err = q.claim(ctx, "second.1", 10, time.Minute, nil)
		require.NoError(t, err)
		require.Len(t, jobs, 3)
		before := map[int64]rowState{}
		for _, id := range ids {
			before[id] = readRow(t, q, id)
			require.Equal(t, "second.1", before[id].LockedBy)
		}

		n, err := q.extend(ctx, "first.1", ids, clock.Now().Add(time.Hour).UnixMilli())
		require.NoError(t, err)
		assert.Zero(t, n, "the lost lease extends nothing")
		for _, id := range ids {
			assert.Equal(t, before[id], readRow(t, q, id), "row %d is the new owner's, unchanged", id)
		}

		// The new owner dies: its lease expires as it was written.
		clock.Advance(2 * time.Minute)
		assert.Equal(t, 3, rescueAll(t, q), "the new owner's rows are rescued when its lease expires")
		for _, id := range ids {
			r := readRow(t, q, id)
			assert.Equal(t, StatusPending, r.Status)
			assert.Equal(t, 2, r.Crashes)
		}

		// The heartbeat of a lease still held does extend it.
		jobs, err = q.claim(ctx, "third.1", 10, time.Minute, nil)
		require.NoError(t, err)
		require.Len(t, jobs, 1, "a suspect that crashed twice is leased alone")
		n, err = q.extend(ctx, "third.1", jobIDs(jobs), clock.Now().Add(time.Hour).UnixMilli())
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		clock.Advance(2 * time.Minute)
		assert.Zero(t, rescueAll(t, q), "an extended lease has not expired")
	})
}

// TestDefaultLeaseOfAKilledWorkerIsRescued: a worker with the default
// options claims a batch, renews its lease once and dies. Its rows stay
// with it until LeaseMargin after that last renewal, and a rescue then
// brings them back; the dead worker's late outcomes change nothing. The
// rescuer itself waits a further LeaseMargin (of real time, see
// rescueLoop) and looks every RescueInterval, so the rows are due again at
// most 2 × LeaseMargin + RescueInterval after the last heartbeat: 45 s with
// the defaults.
func TestDefaultLeaseOfAKilledWorkerIsRescued(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, clock)
		ids := enqueueN(t, q, 4)
		hang := make(chan struct{})
		tr := newFuncTransport(func(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
			<-hang
			return transport.Receipt{MessageID: m.MessageID}, nil
		})
		w, err := NewWorker(q, tr, &WorkerOptions{Logger: quietLogger()})
		require.NoError(t, err)
		o := w.opts
		assert.LessOrEqual(t, 2*o.LeaseMargin+o.RescueInterval, 45*time.Second)

		stop := w.startSenders()
		defer stop()
		n, done, err := w.dispatch(ctx, 4)
		require.NoError(t, err)
		require.Equal(t, 4, n)
		defer func() {
			close(hang)
			require.NoError(t, <-done)
			assert.EqualValues(t, 4, w.Stats().Stale, "the dead worker's outcomes came too late")
			for _, id := range ids {
				assert.Equal(t, StatusPending, readRow(t, q, id).Status)
			}
		}()
		waitProgress(t, "sends started", 10*time.Second, 4, func() int { return int(tr.total.Load()) })

		clock.Advance(o.LeaseMargin / 2)
		require.NoError(t, w.heartbeat(ctx), "the last heartbeat; then the worker dies")

		clock.Advance(o.LeaseMargin - time.Millisecond)
		assert.Zero(t, rescueAll(t, q), "the lease runs LeaseMargin past the last heartbeat")
		clock.Advance(2 * time.Millisecond)
		assert.Equal(t, 4, rescueAll(t, q), "and is rescued once it has expired")
		for _, id := range ids {
			r := readRow(t, q, id)
			assert.Equal(t, StatusPending, r.Status)
			assert.Equal(t, clock.Now().UnixMilli(), r.NextRun, "due at once")
		}
	})
}

// TestRescueTakesALeaseWholeOrNotAtAll: on MariaDB, when another session
// holds one row of an expired lease locked, its owner may be alive and
// waiting behind that lock to renew the lease: the rescuer takes none of
// the lease's rows and reports its token as blocked; once the lock is
// gone it rescues them all.
func TestRescueTakesALeaseWholeOrNotAtAll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMariaDBStore(t)
	clock := newManualClock()
	q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, clock)
	ids := enqueueN(t, q, 2)
	jobs, err := q.claim(ctx, "owner.1", 10, time.Minute, nil)
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	clock.Advance(2 * time.Minute)

	holder := holdRows(t, s, q, ids[1:])
	n, blocked, err := q.rescue(ctx, maxBatchRows, nil, time.Minute)
	require.NoError(t, err)
	assert.Zero(t, n, "half a lease is not rescued")
	assert.Equal(t, []string{"owner.1"}, blocked)
	assert.Equal(t, 2, countRows(t, s.db, q.table, "status = 1 AND locked_by = 'owner.1'"))

	require.NoError(t, holder.Rollback())
	assert.Equal(t, 2, rescueAll(t, q))
}

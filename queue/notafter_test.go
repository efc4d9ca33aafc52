package queue

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHeldMailExpiresAtItsDeadline: a mail whose recipient stays
// suppressed under a lane that holds such mail is checked again no later
// than its not-after deadline, and fails as expired at the first claim
// past it, instead of being held again at every claim for ever.
func TestHeldMailExpiresAtItsDeadline(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		hold := &Screen{ClaimFunc: func(_ context.Context, _ DBTX, _ string, mails []Claimed) (map[int64]Verdict, error) {
			out := map[int64]Verdict{}
			for _, m := range mails {
				out[m.ID] = Verdict{Suppression: Suppression{Reason: "complaint", Since: clock.Now()}, Hold: time.Hour}
			}
			return out, nil
		}}
		q := newQueue(t, s.db, Lane{Screen: hold}, clock)
		deadline := clock.Now().Add(30 * time.Minute)
		id, err := q.Enqueue(ctx, s.db, testMessage("held@example.com"), NotAfter(deadline))
		require.NoError(t, err)
		jobs, err := q.claim(ctx, "w.1", 10, time.Minute, nil)
		require.NoError(t, err)
		assert.Empty(t, jobs, "held, not sent")
		r := readRow(t, q, id)
		require.Equal(t, KindHeld, r.LastKind, "held while its deadline is ahead: the address may yet be released")
		assert.Equal(t, deadline.UnixMilli(), r.NextRun, "checked again at its deadline, not an hour later")
		for i := range 3 {
			clock.Advance(time.Hour + time.Second)
			jobs, err = q.claim(ctx, "w."+strconv.Itoa(2+i), 10, time.Minute, nil)
			require.NoError(t, err)
			assert.Empty(t, jobs)
		}
		r = readRow(t, q, id)
		assert.Equal(t, StatusFailed, r.Status, "the deadline passed 3 hours ago; row: %+v", r)
		assert.Equal(t, kindExpired, r.LastKind)
		assert.Contains(t, r.LastError, "held")
	})
}

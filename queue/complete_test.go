package queue

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCompleteWritesEachRowItsOwnState writes one batch whose rows end
// differently (two sent with their own provider ids, a retry, a failure, a
// row released without an outcome) and one batch where every row ends the
// same: on MySQL the first takes CASE id WHEN ... for the columns that
// differ, the second a plain "col = ?" for all of them; every row must get
// exactly its own state either way.
func TestCompleteWritesEachRowItsOwnState(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
		ids := enqueueN(t, q, 10)
		jobs, err := q.claim(ctx, "w.1", 10, time.Minute, nil)
		require.NoError(t, err)
		require.Len(t, jobs, 10)
		// A release keeps the row's earlier outcome: give those rows one.
		_, err = s.db.ExecContext(ctx, q.d.rebind(`UPDATE `+q.table+` SET last_kind = 'temporary', last_code = 451, last_error = 'earlier', last_rule = 'old'
  WHERE id IN (?, ?)`), ids[4], ids[9])
		require.NoError(t, err)

		mixed := []rowUpdate{
			{id: ids[0], status: StatusSent, attempts: 1, nextRun: 1000, hasOutcome: true, lastKind: "sent", sentAt: 1000, providerID: "p-0"},
			{id: ids[1], status: StatusSent, attempts: 1, nextRun: 1001, hasOutcome: true, lastKind: "sent", sentAt: 1001, providerID: "p-1"},
			{id: ids[2], status: StatusRetry, attempts: 1, nextRun: 5000, hasOutcome: true, lastKind: "temporary", lastCode: 421, lastRule: "smtp-4xx", lastError: "421 try later"},
			{id: ids[3], status: StatusFailed, attempts: 2, crashes: 1, nextRun: 1002, maybeDelivered: true, hasOutcome: true, lastKind: "permanent", lastCode: 550, lastRule: "smtp-5xx", lastError: "550 no such user"},
			{id: ids[4], status: StatusPending, attempts: 0, nextRun: 2000},
		}
		n, err := q.complete(ctx, "w.1", mixed)
		require.NoError(t, err)
		assert.Equal(t, len(mixed), n)

		same := []rowUpdate{}
		for _, id := range ids[5:8] {
			same = append(same, rowUpdate{id: id, status: StatusSent, attempts: 1, nextRun: 3000, hasOutcome: true, lastKind: "sent", sentAt: 3000, providerID: "p-same"})
		}
		n, err = q.complete(ctx, "w.1", same)
		require.NoError(t, err)
		assert.Equal(t, len(same), n)

		// A failure without code, error or rule beside a release: the
		// release keeps its own, even though the zero values are equal.
		bare := []rowUpdate{
			{id: ids[8], status: StatusRetry, attempts: 1, nextRun: 4000, hasOutcome: true, lastKind: "temporary"},
			{id: ids[9], status: StatusPending, attempts: 0, nextRun: 4000},
		}
		n, err = q.complete(ctx, "w.1", bare)
		require.NoError(t, err)
		assert.Equal(t, len(bare), n)

		for _, u := range append(append(mixed, same...), bare...) {
			r := readRow(t, q, u.id)
			var sentAt int64
			var rule string
			require.NoError(t, s.db.QueryRowContext(ctx, rebindFor(t, s.db, `SELECT sent_at, last_rule FROM `+q.table+` WHERE id = ?`), u.id).Scan(&sentAt, &rule))
			want := rowState{Status: u.status, Attempts: u.attempts, Crashes: u.crashes, NextRun: u.nextRun,
				LastKind: u.lastKind, LastCode: u.lastCode, MaybeDelivered: boolInt(u.maybeDelivered), LastError: u.lastError, ProviderID: u.providerID}
			if !u.hasOutcome {
				want.LastKind, want.LastCode, want.LastError = "temporary", 451, "earlier"
				u.lastRule = "old"
			}
			assert.Equal(t, want, r, "row %d", u.id)
			assert.Equal(t, u.sentAt, sentAt, "row %d sent_at", u.id)
			assert.Equal(t, u.lastRule, rule, "row %d last_rule", u.id)
		}
	})
}

// TestProviderIDIsRecordedWhateverItsShape: a transport's message id is
// written to an ASCII column of 255 bytes. One longer or not ASCII (a
// third-party adapter, an unexpected X-Message-Id) is stored cut and with
// "?" for what the column cannot hold, and the outcomes of the batch are
// written; before, MySQL refused the value and with it the outcome write
// of every mail of the batch, which was then rescued and sent again.
func TestProviderIDIsRecordedWhateverItsShape(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		q := newQueue(t, s.db, Lane{}, clock)
		var ids []int64
		for _, to := range []string{"a@example.com", "b@example.com", "c@example.com"} {
			id, err := q.Enqueue(ctx, s.db, testMessage(to))
			require.NoError(t, err)
			ids = append(ids, id)
		}
		jobs, err := q.claim(ctx, "w.1", 10, time.Minute, nil)
		require.NoError(t, err)
		require.Len(t, jobs, 3)
		pids := map[int64]string{jobs[0].id: "ok-id-1", jobs[1].id: "id-" + strings.Repeat("x", 300), jobs[2].id: "idé-ü"}
		var ups []rowUpdate
		for _, j := range jobs {
			ups = append(ups, q.lane.Retry.next(j, event{kind: evAnswered, send: sendResult{receipt: transport.Receipt{MessageID: pids[j.id]}, kind: transport.Sent}}, clock.Now()))
		}
		n, err := q.complete(ctx, "w.1", ups)
		require.NoError(t, err, "the sends happened: their outcomes must be recorded")
		assert.Equal(t, 3, n)
		for _, id := range ids {
			r, err := q.Row(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, "sent", r.Status)
			switch pids[id] {
			case "ok-id-1":
				assert.Equal(t, "ok-id-1", r.ProviderID)
			case "idé-ü":
				assert.Equal(t, "id??-??", r.ProviderID)
			default:
				assert.Len(t, r.ProviderID, 255)
			}
		}
	})
}

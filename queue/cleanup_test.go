package queue

import (
	"context"
	"testing"
	"time"

	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCleanupRacingOperatorRetryKeepsAttachments: an operator's retry that
// commits while Cleanup is deleting the same old failed row wins: the row
// stays, pending, and so do its attachments. Cleanup deletes the files of
// exactly the rows it deleted, never of a row that left the status it
// looked for (on PostgreSQL a subselect takes no lock, so files deleted
// by one first went with the retried mail still in the table).
func TestCleanupRacingOperatorRetryKeepsAttachments(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		if s.name == "sqlite" {
			t.Skip("SQLite serialises writers")
		}
		ctx := context.Background()
		clock := newManualClock()
		q := newQueue(t, s.db, Lane{}, clock)
		m := testMessage("old@example.com")
		m.Attachments = []transport.Attachment{{Filename: "invoice.txt", Data: []byte("invoice 42")}}
		id, err := q.Enqueue(ctx, s.db, m)
		require.NoError(t, err)
		old := clock.Now().Add(-100 * 24 * time.Hour).UnixMilli()
		_, err = s.db.Exec(q.d.rebind(`UPDATE `+q.table+` SET status = 4, next_run = ? WHERE id = ?`), old, id)
		require.NoError(t, err)

		// The operator's retry (actBatch) locks the row first...
		op := s.open(t)
		tx, err := op.BeginTx(ctx, nil)
		require.NoError(t, err)
		defer tx.Rollback() //nolint:errcheck // a no-op after Commit
		var st int
		require.NoError(t, tx.QueryRow(q.d.rebind(`SELECT status FROM `+q.table+` WHERE id = ? FOR UPDATE`), id).Scan(&st))
		require.Equal(t, StatusFailed, st)

		// ... Cleanup starts and waits on the row lock (or, on a slow
		// machine, starts after the retry committed: the outcome must be
		// the same either way) ...
		type result struct {
			n   int64
			err error
		}
		done := make(chan result, 1)
		go func() { n, err := q.Cleanup(ctx, Retention{}, nil); done <- result{n, err} }()
		time.Sleep(time.Second)

		// ... and the retry commits.
		_, err = tx.Exec(q.d.rebind(`UPDATE `+q.table+` SET status = 0, attempts = 0, crashes = 0, next_run = ? WHERE id = ? AND status = 4`), clock.Now().UnixMilli(), id)
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		r := <-done
		require.NoError(t, r.err)
		assert.Zero(t, r.n, "nothing was old enough once the retry won")

		row := readRow(t, q, id)
		require.Equal(t, StatusPending, row.Status, "the operator's retry won: the row stays")
		files, err := q.loadFiles(ctx, id, 1)
		assert.NoError(t, err, "the retried mail's attachment must still be there")
		require.Len(t, files, 1)
		assert.Equal(t, "invoice 42", string(files[0].Data))
	})
}

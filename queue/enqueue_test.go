package queue

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEnqueueRollbackLeavesNothing(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		q := newQueue(t, s.db, Lane{RecipientLimit: SignupRecipientLimit, IPLimit: SignupIPLimit}, nil)
		tx, err := s.db.BeginTx(ctx, nil)
		require.NoError(t, err)
		id, err := q.Enqueue(ctx, tx, testMessage("ann@example.com"), ClientIP("192.0.2.7"))
		require.NoError(t, err)
		require.Positive(t, id)
		var inside int
		require.NoError(t, tx.QueryRow(`SELECT COUNT(*) FROM `+q.table).Scan(&inside))
		require.Equal(t, 1, inside, "the row exists inside the transaction")
		require.NoError(t, tx.Rollback())
		assert.Equal(t, 0, countRows(t, s.db, q.table, "1=1"), "mail rows after rollback")
		assert.Equal(t, 0, countRows(t, s.db, q.limits, "1=1"), "rate-limit counters after rollback")

		// And the limit really was not spent: three more go through.
		for range 3 {
			_, err := q.Enqueue(ctx, s.db, testMessage("ann@example.com"))
			require.NoError(t, err)
		}
		_, err = q.Enqueue(ctx, s.db, testMessage("ann@example.com"))
		require.ErrorIs(t, err, ErrRateLimited)
	})
}

func TestEnqueueConcurrentRecipientLimit(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		lane := Lane{RecipientLimit: Limit{N: 10, Per: time.Hour}}
		clock := newManualClock() // a fixed instant: no window boundary mid-test
		const n = 50
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				db := s.open(t) // separate connections
				q := newQueue(t, db, lane, clock)
				errs[i] = enqueueInOwnTx(ctx, q, db)
			}()
		}
		wg.Wait()
		ok, limited := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case errors.Is(err, ErrRateLimited):
				limited++
				var rl *RateLimitError
				require.ErrorAs(t, err, &rl)
				assert.Positive(t, rl.RetryAfter)
			default:
				t.Errorf("unexpected error: %v", err)
			}
		}
		q := newQueue(t, s.db, lane, clock)
		assert.Equal(t, 10, countRows(t, s.db, q.table, "1=1"), "rows")
		assert.Equal(t, 10, ok)
		assert.Equal(t, 40, limited)
	})
}

// enqueueInOwnTx enqueues in a transaction of its own and commits.
func enqueueInOwnTx(ctx context.Context, q *Queue, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := q.Enqueue(ctx, tx, testMessage("bob@example.com")); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func TestEnqueueIdempotencyKey(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		q := newQueue(t, s.db, Lane{RecipientLimit: Limit{N: 1, Per: time.Hour}}, nil)
		id1, err := q.Enqueue(ctx, s.db, testMessage("cy@example.com"), IdempotencyKey("order-42-confirmation"))
		require.NoError(t, err)
		// Same key: the first id, no second row, and the recipient limit of 1
		// is not hit because a duplicate counts nothing.
		id2, err := q.Enqueue(ctx, s.db, testMessage("cy@example.com"), IdempotencyKey("order-42-confirmation"))
		require.NoError(t, err)
		assert.Equal(t, id1, id2)
		assert.Equal(t, 1, countRows(t, s.db, q.table, "1=1"))

		// Concurrent enqueues with one new key from separate connections: one row.
		var wg sync.WaitGroup
		ids := make([]int64, 8)
		errs := make([]error, 8)
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				db := s.open(t)
				q := newQueue(t, db, Lane{RecipientLimit: NoLimit}, nil)
				ids[i], errs[i] = q.Enqueue(ctx, db, testMessage("dee@example.com"), IdempotencyKey("signup-7"))
			}()
		}
		wg.Wait()
		for i := range ids {
			require.NoError(t, errs[i])
			assert.Equal(t, ids[0], ids[i])
		}
		assert.Equal(t, 1, countRows(t, s.db, q.table, "idem_key = ?", "signup-7"))
	})
}

func TestEnqueueRejectsBadInput(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		q := newQueue(t, s.db, Lane{MaxSize: 2000}, nil)
		inject := testMessage("eve@example.com")
		inject.Subject = "hi\r\nBcc: everyone@example.com"
		big := testMessage("eve@example.com")
		big.HTML = strings.Repeat("x", 2000) // 2 000 bytes, and the rest of the mail when encoded
		cases := []struct {
			name    string
			msg     *transport.Message
			opts    []Option
			wantMsg string
		}{
			{"header injection", inject, nil, "subject"},
			{"no recipient", func() *transport.Message { m := testMessage(""); m.To.Name = ""; return m }(), nil, "to.address"},
			{"over the lane size", big, nil, "over lane"},
			{"bad ip", testMessage("eve@example.com"), []Option{ClientIP("300.1.1.1")}, "client IP"},
			{"bad max attempts", testMessage("eve@example.com"), []Option{MaxAttempts(0)}, "max attempts"},
			{"priority above the range", testMessage("eve@example.com"), []Option{Priority(10)}, "priority 10 out of range 0..9"},
			{"negative priority", testMessage("eve@example.com"), []Option{Priority(-1)}, "priority -1 out of range"},
			{"deadline in the past", testMessage("eve@example.com"), []Option{NotAfter(time.Now().Add(-time.Hour))}, "not-after"},
			// MySQL compares "order-1 " equal to "order-1": the second
			// would be taken for a duplicate there and never queued.
			{"idempotency key ending in a space", testMessage("eve@example.com"), []Option{IdempotencyKey("order-1 ")}, "ends in a space"},
		}
		for _, c := range cases {
			_, err := q.Enqueue(ctx, s.db, c.msg, c.opts...)
			require.Error(t, err, c.name)
			assert.True(t, errors.Is(err, ErrInvalid) || errors.Is(err, transport.ErrInvalidMessage), "%s: %v", c.name, err)
			assert.Contains(t, err.Error(), c.wantMsg, c.name)
		}
		assert.Equal(t, 0, countRows(t, s.db, q.table, "1=1"))
		assert.Equal(t, 0, countRows(t, s.db, q.limits, "1=1"))
	})
}

// TestRefusedBodyKeepsTheCallersTransaction: a body with a NUL (which
// PostgreSQL's text refuses) is refused as invalid before anything is
// written, so the application's own write in the same transaction still
// commits. Before, on PostgreSQL the failed INSERT aborted the whole
// transaction, and the business write was lost at its commit.
func TestRefusedBodyKeepsTheCallersTransaction(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		q := newQueue(t, s.db, Lane{}, nil)
		_, err := s.db.Exec(`CREATE TABLE business (x INTEGER)`)
		require.NoError(t, err)
		tx, err := s.db.BeginTx(ctx, nil)
		require.NoError(t, err)
		defer tx.Rollback() //nolint:errcheck // a no-op after Commit
		_, err = tx.Exec(`INSERT INTO business (x) VALUES (1)`)
		require.NoError(t, err)
		m := testMessage("nul@example.com")
		m.Text = "before\x00after"
		_, err = q.Enqueue(ctx, tx, m)
		require.ErrorIs(t, err, transport.ErrInvalidMessage)
		require.NoError(t, tx.Commit(), "the caller's transaction survives a refused enqueue")
		assert.Equal(t, 1, countRows(t, s.db, "business", "x = 1"))
		assert.Equal(t, 0, countRows(t, s.db, q.table, "1=1"))
	})
}

func TestEnqueueErrorInsideCommittedTxLeavesNothing(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		q := newQueue(t, s.db, Lane{RecipientLimit: Limit{N: 1, Per: time.Hour}}, nil)
		tx, err := s.db.BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = q.Enqueue(ctx, tx, testMessage("fay@example.com"))
		require.NoError(t, err)
		_, err = q.Enqueue(ctx, tx, testMessage("fay@example.com"))
		require.ErrorIs(t, err, ErrRateLimited)
		require.NoError(t, tx.Commit(), "a caller that ignores the error and commits")
		assert.Equal(t, 1, countRows(t, s.db, q.table, "1=1"))
		var n int
		require.NoError(t, s.db.QueryRow(`SELECT SUM(n) FROM `+q.limits).Scan(&n))
		assert.Equal(t, 1, n, "the refused enqueue's count was taken back")
	})
}

func TestEnqueueStoresTheFinalMessage(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		q := newQueue(t, s.db, Lane{}, clock)
		m := testMessage("gus@example.com")
		m.ReplyTo.Address = "help@shop.example"
		id, err := q.Enqueue(ctx, s.db, m, Template("welcome"), Delay(time.Minute), MaxAttempts(1))
		require.NoError(t, err)
		jobs, err := q.claim(ctx, "t1", 10, time.Minute, nil)
		require.NoError(t, err)
		assert.Empty(t, jobs, "delayed mail is not due yet")
		clock.Advance(time.Minute)
		jobs, err = q.claim(ctx, "t1", 10, time.Minute, nil)
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		j := jobs[0]
		assert.Equal(t, id, j.id)
		assert.Equal(t, 1, j.maxAttempts)
		assert.NotEmpty(t, j.msg.MessageID, "a Message-ID is fixed at enqueue time")
		want := *m
		want.MessageID = j.msg.MessageID
		assert.Equal(t, want, j.msg)
		var tmpl string
		require.NoError(t, s.db.QueryRow(rebindFor(t, s.db, `SELECT template FROM `+q.table+` WHERE id = ?`), id).Scan(&tmpl))
		assert.Equal(t, "welcome", tmpl)
	})
}

// countingTx counts the statements an enqueue sends through the caller's
// transaction.
type countingTx struct {
	*sql.Tx
	stmts []string
}

func (c *countingTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	c.stmts = append(c.stmts, query)
	return c.Tx.ExecContext(ctx, query, args...)
}

func (c *countingTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	c.stmts = append(c.stmts, query)
	return c.Tx.QueryRowContext(ctx, query, args...)
}

func (c *countingTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	c.stmts = append(c.stmts, query)
	return c.Tx.QueryContext(ctx, query, args...)
}

// onlyDBTX hides every method but DBTX's, as a caller's own wrapper might.
type onlyDBTX struct{ DBTX }

func TestEnqueueStatementsInTheCallersTx(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		big := Limit{N: 100, Per: time.Hour}
		for _, c := range []struct {
			name      string
			lane      Lane
			opts      []Option
			onlyDBTX  bool
			stmts     int
			rcptCount int // the recipient's count afterwards
		}{
			{"no limit, no key: the INSERT alone", Lane{RecipientLimit: NoLimit, IPLimit: NoLimit}, nil, false, 1, 0},
			{"IP limit but no client IP", Lane{RecipientLimit: NoLimit, IPLimit: big}, nil, false, 1, 0},
			{"two limits: one upsert returning the counts, the INSERT", Lane{RecipientLimit: big, IPLimit: big}, []Option{ClientIP("192.0.2.1")}, false, 2, 1},
			// Without QueryContext (or on MySQL, which has no RETURNING),
			// a read follows the upsert.
			{"two limits through a bare DBTX: one upsert, one read, the INSERT", Lane{RecipientLimit: big, IPLimit: big}, []Option{ClientIP("192.0.2.1")}, true, 3, 2},
		} {
			q := newQueue(t, s.db, c.lane, nil)
			tx, err := s.db.BeginTx(ctx, nil)
			require.NoError(t, err)
			ct := &countingTx{Tx: tx}
			var exec DBTX = ct
			if c.onlyDBTX {
				exec = onlyDBTX{ct}
			}
			_, err = q.Enqueue(ctx, exec, testMessage("hal@example.com"), c.opts...)
			require.NoError(t, err, c.name)
			require.NoError(t, tx.Commit())
			want := c.stmts
			if s.name == "sqlite" {
				want++ // the bodies' INSERT, before the row's (schema version 8)
			}
			assert.Len(t, ct.stmts, want, "%s: %q", c.name, ct.stmts)
			if c.rcptCount > 0 {
				// The counts are the ones the limits see.
				var n int
				require.NoError(t, s.db.QueryRow(`SELECT SUM(n) FROM `+DefaultTable+`_limits`).Scan(&n))
				assert.Equal(t, 2*c.rcptCount, n, "%s: one recipient count and one IP count per enqueue", c.name)
			}
		}
	})
}

func TestEnqueueRefusedByTheSecondLimitTakesBothCountsBack(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		q := newQueue(t, s.db, Lane{RecipientLimit: Limit{N: 5, Per: time.Hour}, IPLimit: Limit{N: 1, Per: time.Hour}}, nil)
		_, err := q.Enqueue(ctx, s.db, testMessage("ivy@example.com"), ClientIP("192.0.2.9"))
		require.NoError(t, err)
		tx, err := s.db.BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = q.Enqueue(ctx, tx, testMessage("jon@example.com"), ClientIP("192.0.2.9"))
		var rl *RateLimitError
		require.ErrorAs(t, err, &rl)
		assert.Equal(t, "client IP", rl.Limit)
		require.NoError(t, tx.Commit(), "a caller that ignores the error and commits")
		var n int
		require.NoError(t, s.db.QueryRow(`SELECT SUM(n) FROM `+q.limits).Scan(&n))
		assert.Equal(t, 2, n, "the first enqueue's two counts; the refused one counted neither recipient nor IP")
		assert.Equal(t, 1, countRows(t, s.db, q.table, "1=1"))
	})
}

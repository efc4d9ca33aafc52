package queue

import (
	"context"
	"database/sql"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// holdRows starts a transaction on s that holds the rows ids locked, as a
// claim that has not committed yet would, and returns it.
func holdRows(t *testing.T, s store, q *Queue, ids []int64) *sql.Tx {
	t.Helper()
	// READ COMMITTED, as a claim: under REPEATABLE READ the server keeps
	// a lock on every row its UPDATE scanned, and on a table this small it
	// scans them all.
	holder, err := s.db.BeginTx(context.Background(), &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Rollback() })
	args := anyIDs(ids)
	_, err = holder.Exec(`UPDATE `+q.table+` SET template = 'held' WHERE id IN (`+placeholders(len(args))+`)`, args...)
	require.NoError(t, err)
	return holder
}

// dueMailOnMariaDB returns a queue on a fresh MariaDB lane with n mails
// due, and their ids.
func dueMailOnMariaDB(t *testing.T, n int) (store, *Queue, []int64) {
	t.Helper()
	s := newMariaDBStore(t)
	q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
	return s, q, enqueueN(t, q, n)
}

// claimedIDs claims up to n rows of q for one claimer, with its cursor
// cur (nil: none), and returns their ids in the claim's order.
func claimedIDs(t *testing.T, q *Queue, n int, cur *cursor) []int64 {
	t.Helper()
	jobs, err := q.claim(context.Background(), "w.1", n, time.Minute, cur)
	require.NoError(t, err)
	return jobIDs(jobs)
}

// jobIDs returns the ids of jobs, in their order.
func jobIDs(jobs []*job) []int64 {
	var ids []int64
	for _, j := range jobs {
		ids = append(ids, j.id)
	}
	return ids
}

// anyIDs returns ids as statement arguments.
func anyIDs(ids []int64) []any {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return args
}

// TestPickSkipsHeldRows: on MariaDB another transaction holds rows at the
// front of the due order (a claim that has not committed yet, or one that
// has just marked a row sent). A claim does not wait for them: it takes
// the rows behind them, looking as far ahead as a few times its own size;
// one that finds nothing but held rows that far reports contention rather
// than an empty queue; once the rows are free, the ones still due are
// taken.
func TestPickSkipsHeldRows(t *testing.T) {
	t.Parallel()
	s, q, ids := dueMailOnMariaDB(t, 40)
	ctx := context.Background()
	holder := holdRows(t, s, q, ids[1:25])
	_, err := holder.ExecContext(ctx, `UPDATE `+q.table+` SET status = ? WHERE id = ?`, StatusSent, ids[0])
	require.NoError(t, err)

	var cur cursor
	claimIDs := func(n int) []int64 { t.Helper(); return claimedIDs(t, q, n, &cur) }
	assert.Empty(t, claimIDs(5), "25 held rows ahead: a claim of 5 looks 20 rows ahead")
	assert.True(t, cur.contended, "due rows remain: the claim was short because of other claims")

	assert.Equal(t, ids[25:37], claimIDs(12), "a claim of 12 looks past them, and takes its rows in due order")
	assert.False(t, cur.contended)

	require.NoError(t, holder.Commit())
	assert.ElementsMatch(t, append(ids[1:25:25], ids[37:]...), claimIDs(30), "the rows no longer held; not the one sent meanwhile")
	assert.False(t, cur.contended, "short because nothing else is due")
}

// TestWorkerBacksOffFromContention: a worker whose claims find only rows
// that other claims hold does not take that for an empty queue and sleep
// its poll interval (a minute here): it claims again after a short,
// growing pause, and takes the rows as soon as they are free.
func TestWorkerBacksOffFromContention(t *testing.T) {
	t.Parallel()
	s, q, ids := dueMailOnMariaDB(t, 40)
	holder := holdRows(t, s, q, ids[:24])

	var claims atomic.Int64
	tr := newFuncTransport(func(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
		return transport.Receipt{MessageID: m.MessageID}, nil
	})
	w, err := NewWorker(q, tr, &WorkerOptions{Batch: 2, Concurrency: 1, PollInterval: time.Minute, CleanupInterval: -1,
		Observer: &Observer{ClaimFunc: func(ClaimEvent) { claims.Add(1) }}, Logger: quietLogger()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); assert.NoError(t, w.Run(ctx)) }()
	defer func() { cancel(); <-done }()

	waitProgress(t, "claims", 20*time.Second, 3, func() int { return int(claims.Load()) })
	assert.Zero(t, w.Stats().Sent, "every row in reach is held")
	require.NoError(t, holder.Rollback())
	waitProgress(t, "sent", 20*time.Second, 40, func() int { return int(w.Stats().Sent) })
}

// TestClaimSkipsUncommittedMail: a claim's plain read on MariaDB sees
// uncommitted rows (READ UNCOMMITTED, see claimTxOptions), but a mail
// whose enqueue has not committed is never claimed, and the claim does not
// wait for it; once committed it is claimed, and a rolled-back one never
// is.
func TestClaimSkipsUncommittedMail(t *testing.T) {
	t.Parallel()
	s, q, ids := dueMailOnMariaDB(t, 3)
	ctx := context.Background()
	enqueueOpen := func(to string) (*sql.Tx, int64) {
		t.Helper()
		tx, err := s.db.BeginTx(ctx, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback() })
		id, err := q.Enqueue(ctx, tx, testMessage(to))
		require.NoError(t, err)
		return tx, id
	}
	committed, late := enqueueOpen("late@example.com")
	rolledBack, _ := enqueueOpen("never@example.com")

	claimIDs := func() []int64 { t.Helper(); return claimedIDs(t, q, 10, nil) }
	assert.Equal(t, ids, claimIDs(), "only the committed mail")
	require.NoError(t, committed.Commit())
	require.NoError(t, rolledBack.Rollback())
	assert.Equal(t, []int64{late}, claimIDs())
	assert.Empty(t, claimIDs())
}

// withHistory adds about 2^doublings rows of sent mail to q's lane, as
// a lane in use has: on a table of a few hundred rows the server reads
// everything whatever the statement.
func withHistory(t *testing.T, q *Queue, doublings int) {
	t.Helper()
	_, err := q.db.Exec(`INSERT INTO `+q.table+` (status, `+copyColumns+`) VALUES (2, `+placeholders(len(strings.Split(copyColumns, ",")))+`)`,
		1, 5, 0, 0, 0, "<history@example.com>", "", "", "from@example.com", "", "history@example.com", "", "", "", "history", "text", "html", "[]")
	require.NoError(t, err)
	for range doublings {
		_, err := q.db.Exec(`INSERT INTO ` + q.table + ` (status, ` + copyColumns + `) SELECT 2, ` + copyColumns + ` FROM ` + q.table)
		require.NoError(t, err)
	}
}

// copyColumns are the columns withHistory copies.
const copyColumns = `attempts, max_attempts, next_run, not_after, created_at, message_id, template, client_ip,
  from_addr, from_name, to_addr, to_name, reply_to_addr, reply_to_name, subject, text_body, html_body, headers`

// lockDue runs a claim's locking read in tx for the rows ids, as
// pickLocking does, and returns the ids it took.
func lockDue(t *testing.T, tx *sql.Tx, q *Queue, ids []int64) []int64 {
	t.Helper()
	rows, err := tx.Query(q.d.bounded(q.lockDueSelect(len(ids))), append(anyIDs(ids), time.Now().UnixMilli())...)
	require.NoError(t, err)
	jobs, err := scanJobs(rows, "due rows")
	require.NoError(t, err)
	return jobIDs(jobs)
}

// TestClaimLocksOnlyWhatItTakes: two claims on MariaDB under contention.
// The first has locked 30 due rows and not marked them yet. The second's
// plain read found 260 rows, the first claim's 30 among them, 200 of them
// taken by other claims since: of the 260 only 60 are still due, and its
// locking read takes the 30 the first claim does not hold. Then the first
// marks its rows sending without waiting for the second. Left to itself,
// the server reads the second's 260 ids through the pending range of the
// (status, next_run, id) index (the range looks smaller than the list),
// locks the index entries of the first claim's rows before it skips them,
// and keeps those locks: the first claim's marking waited for the second,
// and two claims in that position deadlocked.
func TestClaimLocksOnlyWhatItTakes(t *testing.T) {
	t.Parallel()
	s, q, _ := dueMailOnMariaDB(t, 0)
	withHistory(t, q, 12)
	ctx := context.Background()
	taken := enqueueN(t, q, 200)
	require.Len(t, claimedIDs(t, q, 200, nil), 200, "taken by other claims")
	due := enqueueN(t, q, 60)
	a, b := due[:30], due[30:]

	first, err := s.db.BeginTx(ctx, q.d.claimTxOptions())
	require.NoError(t, err)
	defer first.Rollback() //nolint:errcheck
	assert.Equal(t, b, lockDue(t, first, q, b))

	second, err := s.db.BeginTx(ctx, q.d.claimTxOptions())
	require.NoError(t, err)
	defer second.Rollback() //nolint:errcheck
	all := append(taken, due...)
	assert.Equal(t, a, lockDue(t, second, q, all), "the rows the first claim holds are skipped")
	tbl, plan := analyze(t, s.db, q.lockDueSelect(len(all)), append(anyIDs(all), time.Now().UnixMilli())...)
	assert.Equal(t, "PRIMARY", tbl.Key, "the locking read goes by id: %s", plan)

	var jobs []*job
	for _, id := range b {
		jobs = append(jobs, &job{id: id})
	}
	require.NoError(t, q.markSending(ctx, first, jobs, "w.first", time.Now().Add(time.Minute).UnixMilli()),
		"the first claim marks its rows without waiting for the second")
	require.NoError(t, first.Commit())
	require.NoError(t, second.Commit())
}

// TestClaimLocksInIdOrder: on MariaDB a claim asks for no row lock below
// the highest id it holds, so that two claims can never each wait for a
// row the other holds. Here the pending rows at the front are held by
// another claim; the claim takes the pending rows behind them, and the
// retry rows it then finds (lower ids: they were enqueued first) are left
// for its next claim, which the worker makes at once (cut) and which
// takes them.
func TestClaimLocksInIdOrder(t *testing.T) {
	t.Parallel()
	s, q, retry := dueMailOnMariaDB(t, 3)
	ctx := context.Background()
	_, err := s.db.ExecContext(ctx, `UPDATE `+q.table+` SET status = ?, attempts = 1`, StatusRetry)
	require.NoError(t, err)
	pending := enqueueN(t, q, 6)
	holder := holdRows(t, s, q, pending[:3])

	var cur cursor
	assert.Equal(t, pending[3:], claimedIDs(t, q, 6, &cur), "the pending rows nobody holds; not the retry rows below them")
	assert.True(t, cur.cut, "due rows were left: claim again at once")
	assert.False(t, cur.contended)
	assert.Equal(t, retry, claimedIDs(t, q, 6, &cur), "the next claim takes them")
	assert.False(t, cur.cut)
	require.NoError(t, holder.Rollback())
	assert.Equal(t, pending[:3], claimedIDs(t, q, 6, &cur))
}

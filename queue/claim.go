package queue

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// claimColumns are read for each claimed row, before its bodies and
// headers (withBodies).
const claimColumns = `id, nice, next_run, attempts, max_attempts, crashes, not_after, maybe_delivered, created_at, attachments, message_id,
  from_addr, from_name, to_addr, to_name, reply_to_addr, reply_to_name, subject`

// claim takes up to n due rows for token in one short transaction and
// leases them until now + lease: it locks the picked rows and marks them
// sending with locked_by = token. The attempts column is not touched
// (state.go explains the accounting). Rows are picked one status at a time,
// each an index range in due order: pending first (so fresh mail is never
// stuck behind a deferred backlog), then retry if the batch is not full.
// Rows whose lease expired are not claimed here: the rescuer (rescue.go)
// returns them to pending or retry first. With SKIP LOCKED, concurrent
// claimers pass the rows others hold (see pickLocking).
//
// cur, when not nil, is the claimer's cursor (see cursor).
func (q *Queue) claim(ctx context.Context, token string, n int, lease time.Duration, cur *cursor) ([]*job, error) {
	if n <= 0 {
		return nil, nil
	}
	now := q.now()
	tx, done, err := q.beginWriteWith(ctx, q.d.claimTxOptions())
	if err != nil {
		return nil, fmt.Errorf("queue: claim: begin: %w", err)
	}
	defer done()
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit

	var jobs []*job
	contended, left := false, false
	if q.d.mysqlSkipLocked() {
		if jobs, contended, left, err = q.pickLocking(ctx, tx, cur, now, n); err != nil {
			return nil, err
		}
	} else {
		for _, status := range []int{StatusPending, StatusRetry} {
			if len(jobs) == n {
				break
			}
			picked, c, err := q.pick(ctx, tx, cur, status, now, n-len(jobs))
			if err != nil {
				return nil, err
			}
			jobs = append(jobs, picked...)
			contended = contended || c
		}
	}
	picked := len(jobs)
	jobs = isolateSuspects(jobs, cur.suspectLimit())
	if cur != nil {
		cur.contended = contended && picked < n
		cur.cut = len(jobs) < picked || left
		if cur.cut {
			// The rows cut off are behind the cursor's new position:
			// the next pick starts from the front again.
			clear(cur.at)
		}
	}
	if len(jobs) == 0 {
		return nil, tx.Commit()
	}
	leaseEnd := now + lease.Milliseconds()
	for _, j := range jobs {
		j.token = token
		j.attempts++
	}
	if err := q.markSending(ctx, tx, jobs, token, leaseEnd); err != nil {
		return nil, fmt.Errorf("queue: claim: marking rows sending: %w", err)
	}
	if jobs, err = q.screenClaimed(ctx, tx, tx, jobs, token); err != nil {
		return nil, fmt.Errorf("queue: claim: checking the suppression list: %w", err)
	}
	if jobs, err = q.throttleClaimed(ctx, tx, tx, jobs, token); err != nil {
		return nil, fmt.Errorf("queue: claim: checking the send limits: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("queue: claim: commit: %w", err)
	}
	return jobs, nil
}

// markSending leases the picked rows to token until leaseEnd. On MySQL it
// is one statement. On SQLite it is one short statement per row, parsed
// once: an IN list of a different length each claim would be parsed anew
// each time, and parsing costs SQLite more than running the statement.
func (q *Queue) markSending(ctx context.Context, tx *sql.Tx, jobs []*job, token string, leaseEnd int64) error {
	set := `UPDATE ` + q.table + ` SET status = ` + strconv.Itoa(StatusSending) + `, locked_by = ?, locked_until = ?, next_run = ?`
	if q.d.sqlite {
		db := reusing(tx)
		for _, j := range jobs {
			if _, err := db.ExecContext(ctx, set+` WHERE id = ?`, token, leaseEnd, leaseEnd, j.id); err != nil {
				return err
			}
		}
		return nil
	}
	args := []any{token, leaseEnd, leaseEnd}
	for _, j := range jobs {
		args = append(args, j.id)
	}
	_, err := tx.ExecContext(ctx, q.d.bounded(set+` WHERE id IN (`+placeholders(len(jobs))+`)`), args...)
	return err
}

// isolateSuspects cuts a claim so that rows which were in a lease that
// expired while sending (crashes > 0) are leased apart from ordinary rows:
// if one of them is the mail that kills the worker, it takes no innocent
// row down with it. A claim holds either ordinary rows, or suspects that
// crashed once, as many as the claim took (up to the worker's free
// senders: a killed worker's whole batch comes back at once, and sending
// it one mail at a time took minutes), or a single suspect that crashed
// more than once. So a batch-mate of a poison mail crashes at most twice,
// once in the batch and once among the suspects, and is then sent alone,
// while the poison mail's third crash, alone, fails it as poison
// (maxCrashes).
// The rows cut off stay due and locked only until the claim commits.
func isolateSuspects(jobs []*job, most int) []*job {
	i := slices.IndexFunc(jobs, func(j *job) bool { return j.crashes > 0 })
	switch {
	case i < 0:
		return jobs
	case i > 0:
		return jobs[:i]
	case jobs[0].crashes > 1:
		return jobs[:1]
	}
	if n := slices.IndexFunc(jobs, func(j *job) bool { return j.crashes != 1 }); n > 0 {
		jobs = jobs[:n]
	}
	if most > 0 && len(jobs) > most {
		jobs = jobs[:most]
	}
	return jobs
}

// A cursor remembers, per status, where a claimer's last pick ended (the
// due order's (nice, next_run, id) of the last row it took), so that its next
// pick starts there instead of at the start of the status's index range.
//
// Why: a claim moves its rows out of the range, but InnoDB only
// delete-marks their old index entries and purges them later, in the
// background. Under a steady drain thousands of such entries wait at the
// start of the range, and a pick from the start steps over every one of
// them, at the cost of a clustered-index lookup each: the pick grew to
// thousands of pages read for 50 rows, and most of the database's time.
//
// A row can become due behind the cursor: a producer's transaction that
// committed after later rows were claimed, a row skipped while another
// claimer held it, a row whose lease ended. So a pick that comes back short
// also picks from the start, and every fullPickEvery the pick starts from
// the start anyway: such a row waits at most that long behind a backlog.
// The cursor is kept only while picks come back full (a backlog): on a
// shallow queue every pick starts at the front, one statement as before.
type cursor struct {
	at     map[int]dueKey // per status
	fullAt time.Time      // the last pick from the start of every status
	// cut: the last claim took fewer rows than it picked, to lease a
	// suspect alone (isolateSuspects), or left due rows to keep its lock
	// order (pickLocking); due rows remain, so the claimer claims again at
	// once, from the front, instead of waiting for its poll interval.
	cut bool
	// contended: the last claim came back short because other claims
	// held or took the rows it found, not because no more rows were due
	// (pickLocking); the claimer backs off, a quarter second at first
	// (Worker.claimLoop).
	contended bool
	// suspects is the most suspects a claim leases together: the
	// claimer's concurrency, so that all of them are sending at once;
	// 0 is no bound.
	suspects int
}

// suspectLimit is c.suspects, 0 for no cursor.
func (c *cursor) suspectLimit() int {
	if c == nil {
		return 0
	}
	return c.suspects
}

// dueKey is a row's place in the due order: (nice, next_run, id).
type dueKey struct{ nice, nextRun, id int64 }

// after reports whether k comes after o in the due order.
func (k dueKey) after(o dueKey) bool {
	return cmp.Or(cmp.Compare(k.nice, o.nice), cmp.Compare(k.nextRun, o.nextRun), cmp.Compare(k.id, o.id)) > 0
}

// refresh forgets the cursor's positions once fullPickEvery has passed
// since it last did (or the clock went back): the next picks start from
// the front.
func (c *cursor) refresh(now time.Time) {
	if c.at == nil {
		c.at = map[int]dueKey{}
	}
	if now.Sub(c.fullAt) >= fullPickEvery || now.Before(c.fullAt) {
		clear(c.at)
		c.fullAt = now
	}
}

// fullPickEvery bounds how long a due row behind a cursor can wait.
const fullPickEvery = time.Second

// pick reads up to limit due rows of one status, in due order, starting at
// cur's position when it has one. contended reports that it came back
// short because of other claims (see pickLocking).
func (q *Queue) pick(ctx context.Context, tx *sql.Tx, cur *cursor, status int, now int64, limit int) (jobs []*job, contended bool, err error) {
	if cur == nil {
		return q.pickRows(ctx, tx, status, now, limit, nil)
	}
	cur.refresh(q.clock.Now())
	if from, ok := cur.at[status]; ok {
		if jobs, contended, err = q.pickRows(ctx, tx, status, now, limit, &from); err != nil {
			return nil, false, err
		}
	}
	if len(jobs) < limit {
		// Rows this transaction already holds come back again: skip them.
		more, c, err := q.pickRows(ctx, tx, status, now, limit, nil)
		if err != nil {
			return nil, false, err
		}
		contended = contended || c
		held := make(map[int64]bool, len(jobs))
		for _, j := range jobs {
			held[j.id] = true
		}
		for _, j := range more {
			if len(jobs) < limit && !held[j.id] {
				jobs = append(jobs, j)
			}
		}
	}
	if len(jobs) < limit {
		delete(cur.at, status)
		return jobs, contended, nil
	}
	cur.at[status] = lastDue(jobs)
	return jobs, false, nil
}

// lastDue returns the due-order key of the last of jobs.
func lastDue(jobs []*job) dueKey {
	last := dueKey{}
	for _, j := range jobs {
		if k := j.dueKey(); k.after(last) {
			last = k
		}
	}
	return last
}

// pickQuery is the claim's SELECT for one status where the pick is one
// statement (SQLite, PostgreSQL, and MySQL without SKIP LOCKED; see
// pickLocking for MySQL/MariaDB with it): on PostgreSQL, SKIP LOCKED tests
// a row's lock on the tuple the index led it to and keeps no lock on the
// rows it skips, so the single statement is the cheap one there. It reads
// exactly the rows it returns from the (status, nice, next_run, id) index.
// With after, it starts after a given row.
func (q *Queue) pickQuery(after bool) string {
	return q.d.bounded(q.pickSelect(after) + q.d.lockSkip())
}

// pickSelect is pickQuery without its locking clause and server-side bound.
// Its arguments: status, now, [after's nice twice, next_run twice and id], limit.
func (q *Queue) pickSelect(after bool) string {
	selectFrom, missing := q.withBodies(claimColumns)
	where := dueWhere(fromFront)
	if after {
		where = dueWhere(fromCursor)
	}
	if q.d.sqlite {
		where += ` AND NOT ` + missing
	}
	return `SELECT ` + selectFrom + q.d.claimIndex() + where + ` ORDER BY t.nice, t.next_run, t.id LIMIT ?`
}

// everyNice lists every nice value, so that the due condition is one
// index range per priority, (status, nice, next_run <= now), read in the
// index's order: without it, next_run would only filter the entries of
// the status's whole range, deferred retries included.
var everyNice = func() string {
	var s []string
	for n := range MaxPriority + 1 {
		s = append(s, strconv.Itoa(n))
	}
	return strings.Join(s, ", ")
}()

// from says where a pick starts in the due order.
type from int

const (
	fromFront  from = iota // at the start
	fromCursor             // after a claimer's cursor, in the cursor's priority only
	fromKey                // strictly after a row
)

// dueWhere is the condition of a status's due rows in due order: highest
// priority (lowest nice) first, then oldest first. From a cursor it still
// takes every row of another priority: the cursor skips only its own
// priority's rows before it, so a mail of a higher priority than the
// backlog being drained is claimed at the next pick. Its arguments are
// dueArgs'.
func dueWhere(f from) string {
	where := ` WHERE t.status = ? AND t.nice IN (` + everyNice + `) AND t.next_run <= ?`
	switch f {
	case fromCursor:
		where += ` AND (t.nice <> ? OR (t.nice = ? AND t.next_run >= ? AND (t.next_run > ? OR t.id > ?)))`
	case fromKey:
		where += ` AND (t.nice > ? OR (t.nice = ? AND t.next_run >= ? AND (t.next_run > ? OR t.id > ?)))`
	}
	return where
}

// dueArgs are the arguments of dueWhere(fromCursor or fromKey) when after
// is not nil, and of dueWhere(fromFront) when it is.
func dueArgs(status int, now int64, after *dueKey) []any {
	args := []any{status, now}
	if after != nil {
		args = append(args, after.nice, after.nice, after.nextRun, after.nextRun, after.id)
	}
	return args
}

// dueKeysSelect reads the due order's keys of up to LIMIT due rows of a
// status from the (status, nice, next_run, id) index alone, without locks.
// Its arguments are dueArgs' and the limit.
func (q *Queue) dueKeysSelect(f from) string {
	return `SELECT t.nice, t.next_run, t.id FROM ` + q.table + ` t` + q.d.claimIndex() + dueWhere(f) + ` ORDER BY t.nice, t.next_run, t.id LIMIT ?`
}

// lockDueSelect locks and reads, of n rows named by id, those that are
// still due (pending or retry), skipping the rows another transaction
// holds. Its arguments: the n ids, now.
func (q *Queue) lockDueSelect(n int) string {
	selectFrom, _ := q.withBodies(claimColumns)
	return `SELECT ` + selectFrom + q.d.byID() + ` WHERE t.id IN (` + placeholders(n) + `) AND (t.` + statusIs(StatusPending) + ` OR t.` + statusIs(StatusRetry) +
		`) AND t.next_run <= ?` + q.d.lockSkip()
}

// pickRows reads up to limit due rows of one status for the claim in tx,
// after the row at after when it is not nil, with one statement (see
// pickQuery). contended is always false: without SKIP LOCKED a claim
// waits for the rows others hold instead of passing them.
func (q *Queue) pickRows(ctx context.Context, tx *sql.Tx, status int, now int64, limit int, after *dueKey) (jobs []*job, contended bool, err error) {
	rows, err := tx.QueryContext(ctx, q.pickQuery(after != nil), append(dueArgs(status, now, after), limit)...)
	if err != nil {
		return nil, false, fmt.Errorf("queue: claim: picking %s rows: %w", StatusName(status), err)
	}
	jobs, err = scanJobs(rows, StatusName(status)+" rows")
	return jobs, false, err
}

// dueKeys reads the keys of up to limit due rows of status, in due order,
// after the row at after, as f says, when it is not nil.
func (q *Queue) dueKeys(ctx context.Context, tx *sql.Tx, status int, now int64, limit int, after *dueKey, f from) ([]dueKey, error) {
	if after == nil {
		f = fromFront
	}
	rows, err := tx.QueryContext(ctx, q.d.bounded(q.dueKeysSelect(f)), append(dueArgs(status, now, after), limit)...)
	if err != nil {
		return nil, fmt.Errorf("queue: claim: picking %s rows: %w", StatusName(status), err)
	}
	defer rows.Close()
	var keys []dueKey
	for rows.Next() {
		var k dueKey
		if err := rows.Scan(&k.nice, &k.nextRun, &k.id); err != nil {
			return nil, fmt.Errorf("queue: claim: reading a due row: %w", err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queue: claim: picking %s rows: %w", StatusName(status), err)
	}
	return keys, nil
}

// scanJobs reads the claimed rows of a pick, columns as withBodies(claimColumns),
// and closes rows; what names the rows in its errors.
func scanJobs(rows *sql.Rows, what string) ([]*job, error) {
	defer rows.Close()
	var jobs []*job
	for rows.Next() {
		j := &job{}
		var maybe int
		var headers string
		m := &j.msg
		if err := rows.Scan(&j.id, &j.nice, &j.nextRun, &j.attempts, &j.maxAttempts, &j.crashes, &j.notAfter, &maybe, &j.createdAt, &j.files, &m.MessageID,
			&m.From.Address, &m.From.Name, &m.To.Address, &m.To.Name, &m.ReplyTo.Address, &m.ReplyTo.Name,
			&m.Subject, &m.Text, &m.HTML, &headers); err != nil {
			return nil, fmt.Errorf("queue: claim: reading a row: %w", err)
		}
		j.maybeDelivered = maybe != 0
		var err error
		if m.Headers, err = parseHeaders(headers); err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queue: claim: picking %s: %w", what, err)
	}
	return jobs, nil
}

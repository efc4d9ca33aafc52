package queue

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
)

// maxPickRounds bounds the rounds of one pickLocking.
const maxPickRounds = 4

// pickLocking is the claim's pick on MySQL/MariaDB with SKIP LOCKED: up to
// n due rows, pending first, then retry. Each round is a plain read of the
// keys of as many due rows as the claim still needs, per status, from the
// (status, nice, next_run, id) index, which takes no lock; then one locking read
// of all those rows by primary key, which takes the ones still due and
// skips the ones another claim holds. A round that comes back short while
// more rows are due is followed by one after the last keys read, up to
// maxPickRounds; if the claim is still short, it reports contended, and
// the worker backs off before it claims again (Worker.claimLoop) rather
// than reading on past the rows the other claimers are taking. Retry rows
// are read only once the pending rows read come back short.
//
// Lock order. Every row lock a claim asks for is on a higher id than every
// row it already holds: a round locks its rows in one statement, which
// visits them in id order, and a later round leaves out the rows at or
// below the highest id the claim holds: they are left for the next claim,
// which the worker makes at once (left; see cursor.cut). markSending then
// only writes rows the claim holds. Two claims can then
// never each wait for a row the other holds. They did when a claim locked
// in several statements: the rows after its cursor, then the rows at the
// front of the due order, then the retry rows; another claim that had
// locked the front first and then asked for the rows after it closed the
// circle. SKIP LOCKED should have made both pass over the other's rows,
// but MariaDB 10.11 found a deadlock between the two locking reads instead
// (error 1213, in about one 16-worker drain in twenty).
//
// Why not one SELECT ... FOR UPDATE SKIP LOCKED on the index: that locks
// an index entry and then the row for each row it returns, and tries (and
// skips) each row the other claimers hold, all on the same few index pages
// at the front of the due order. With several workers, the server spent
// about half again as much CPU per mail as with one, much of it spinning
// on the latches of those pages' lock lists. The plain read locks nothing,
// and the locking read touches only the rows it may take, by id, spread
// over the table's pages.
//
// A row can look due to the plain read and not be by the time it is
// locked (another claim took it and committed): the locking read's
// condition reads the row's latest version, so such a row is not taken,
// and its lock is released at once (READ UNCOMMITTED, the claim's level,
// and READ COMMITTED do that alike; see claimTxOptions).
//
// cur, when not nil, is the claimer's cursor: the first round reads each
// status from the cursor's position, and from the front when that comes
// back short (see cursor).
func (q *Queue) pickLocking(ctx context.Context, tx *sql.Tx, cur *cursor, now int64, n int) (jobs []*job, contended, left bool, err error) {
	if cur != nil {
		cur.refresh(q.clock.Now())
	}
	statuses := [...]int{StatusPending, StatusRetry}
	statusOf := map[int64]int{} // the status each candidate was read in
	asked := map[int]int{}      // per status read: the rows its first read asked for
	next := map[int]*dueKey{}   // per status: more rows may be due after this key
	var held int64              // the highest id the claim holds
	for range maxPickRounds {
		want := n - len(jobs)
		if want <= 0 {
			break
		}
		var keys []dueKey
		for _, status := range statuses {
			need := want - len(keys)
			if need <= 0 {
				break
			}
			var found []dueKey
			more := false
			if _, read := asked[status]; !read {
				asked[status] = need
				found, more, err = q.dueCandidates(ctx, tx, cur, status, now, need)
			} else if from := next[status]; from != nil {
				found, err = q.dueKeys(ctx, tx, status, now, need, from, fromKey)
				more = len(found) == need
			}
			if err != nil {
				return nil, false, false, err
			}
			delete(next, status)
			if more {
				next[status] = &found[len(found)-1]
			}
			for _, k := range found {
				if _, seen := statusOf[k.id]; seen {
					continue
				}
				if k.id <= held {
					left = true // for the next claim: see Lock order above
					continue
				}
				statusOf[k.id] = status
				keys = append(keys, k)
			}
		}
		var locked []*job
		if len(keys) > 0 {
			if locked, err = q.lockDue(ctx, tx, keys, now); err != nil {
				return nil, false, false, err
			}
		}
		jobs = append(jobs, locked...)
		for _, j := range locked {
			held = max(held, j.id)
		}
		// Short because other claims hold or took rows it found, while
		// more rows may be due: read on.
		if contended = len(locked) < len(keys) && len(next) > 0; !contended {
			break
		}
	}
	slices.SortFunc(jobs, func(a, b *job) int {
		if sa, sb := statusOf[a.id], statusOf[b.id]; sa != sb {
			return cmp.Compare(statusRank(sa), statusRank(sb))
		}
		return cmp.Or(cmp.Compare(a.nice, b.nice), cmp.Compare(a.nextRun, b.nextRun), cmp.Compare(a.id, b.id))
	})
	if cur != nil {
		for status, want := range asked {
			var of []*job
			for _, j := range jobs {
				if statusOf[j.id] == status {
					of = append(of, j)
				}
			}
			if len(of) < want {
				delete(cur.at, status)
			} else {
				cur.at[status] = lastDue(of)
			}
		}
	}
	return jobs, contended && len(jobs) < n, left && len(jobs) < n, nil
}

// statusRank orders the statuses a claim takes: pending before retry.
func statusRank(status int) int {
	if status == StatusPending {
		return 0
	}
	return 1
}

// dueCandidates reads, without locks, the keys of up to limit due rows of
// status in due order: from cur's position when it has one, then from the
// front of the due order if that came back short. more reports that the
// last read came back full: more rows may be due after its last key.
func (q *Queue) dueCandidates(ctx context.Context, tx *sql.Tx, cur *cursor, status int, now int64, limit int) (keys []dueKey, more bool, err error) {
	if cur != nil {
		if from, ok := cur.at[status]; ok {
			if keys, err = q.dueKeys(ctx, tx, status, now, limit, &from, fromCursor); err != nil || len(keys) == limit {
				return keys, err == nil, err
			}
		}
	}
	front, err := q.dueKeys(ctx, tx, status, now, limit, nil, fromFront)
	if err != nil {
		return nil, false, err
	}
	if len(keys) == 0 {
		return front, len(front) == limit, nil
	}
	seen := make(map[int64]bool, len(keys))
	for _, k := range keys {
		seen[k.id] = true
	}
	for _, k := range front {
		if len(keys) < limit && !seen[k.id] {
			keys = append(keys, k)
		}
	}
	return keys, len(front) == limit, nil
}

// lockDue locks and reads, in one statement, the rows of keys that are
// still due, skipping those another transaction holds.
func (q *Queue) lockDue(ctx context.Context, tx *sql.Tx, keys []dueKey, now int64) ([]*job, error) {
	args := make([]any, 0, len(keys)+1)
	for _, k := range keys {
		args = append(args, k.id)
	}
	rows, err := tx.QueryContext(ctx, q.d.bounded(q.lockDueSelect(len(keys))), append(args, now)...)
	if err != nil {
		return nil, fmt.Errorf("queue: claim: locking due rows: %w", err)
	}
	return scanJobs(rows, "due rows")
}

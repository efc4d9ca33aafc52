package queue

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// maxBatchRows bounds the rows one statement names.
const maxBatchRows = 500

// complete writes the new states of rows claimed under token (see next in
// state.go), in as few statements as the batch size allows (one per
// maxBatchRows). It is fenced: a row is only written while it is still in
// sending with locked_by = token, so a worker whose lease expired and was
// taken over changes nothing. It returns how many rows were written; the
// rest were stale.
//
// On MariaDB and PostgreSQL a batch that one statement writes, and that
// feeds no suppression list, is that one statement on its own, committed
// by itself: with a transaction around it, it cost four round trips
// (isolation, begin, update, commit) where one does. The statement names
// its rows by primary key, so it locks only them in any isolation level
// (on MariaDB it is held to the primary key: see byID).
func (q *Queue) complete(ctx context.Context, token string, ups []rowUpdate) (n int, err error) {
	if len(ups) == 0 {
		return 0, nil
	}
	if q.d.mariadb || q.d.postgres {
		if len(ups) <= maxBatchRows && !q.feedsScreen(ups) {
			return q.writeChunk(ctx, q.db, ups, "locked_by = ?", []any{token})
		}
	}
	err = q.write(ctx, func(db execer) error {
		if n, err = q.writeRows(ctx, db, ups, "locked_by = ?", token); err != nil {
			return err
		}
		return q.feedScreen(ctx, db, ups)
	})
	return n, err
}

// feedsScreen reports whether completing ups tells the lane's Screen of
// a permanent failure (feedScreen).
func (q *Queue) feedsScreen(ups []rowUpdate) bool {
	s := q.lane.Screen
	return s != nil && s.FailedFunc != nil && slices.ContainsFunc(ups, func(u rowUpdate) bool { return u.failure != nil })
}

// feedScreen tells the lane's Screen of the permanent failures among ups,
// in the completion's transaction db.
func (q *Queue) feedScreen(ctx context.Context, db execer, ups []rowUpdate) error {
	s := q.lane.Screen
	if s == nil || s.FailedFunc == nil {
		return nil
	}
	var failed []Failure
	for _, u := range ups {
		if u.failure != nil {
			f := *u.failure
			f.Lane = q.lane.Name
			failed = append(failed, f)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	tx, ok := db.(DBTX)
	if !ok {
		return fmt.Errorf("queue: recording outcomes: %T cannot read", db)
	}
	if err := s.FailedFunc(ctx, tx, failed); err != nil {
		return fmt.Errorf("queue: recording outcomes: feeding the suppression list: %w", err)
	}
	return nil
}

// execer is a *sql.DB or *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// writeRows writes ups to rows that are still sending and match fence (an
// SQL condition with fenceArgs), and returns how many it wrote.
//
// On MySQL it writes one statement per maxBatchRows rows (CASE id WHEN ...),
// which costs one round trip. On SQLite, where a statement costs no round
// trip but such a CASE costs rows × rows to evaluate, it writes one short
// statement per row; db must then be a transaction.
func (q *Queue) writeRows(ctx context.Context, db execer, ups []rowUpdate, fence string, fenceArgs ...any) (int, error) {
	if q.d.sqlite {
		return q.writeEach(ctx, db, ups, fence, fenceArgs)
	}
	applied := 0
	for len(ups) > 0 {
		chunk := ups[:min(len(ups), maxBatchRows)]
		ups = ups[len(chunk):]
		n, err := q.writeChunk(ctx, db, chunk, fence, fenceArgs)
		applied += n
		if err != nil {
			return applied, err
		}
	}
	return applied, nil
}

func (q *Queue) writeChunk(ctx context.Context, db execer, ups []rowUpdate, fence string, fenceArgs []any) (int, error) {
	var b strings.Builder
	var args []any
	table := q.table
	if q.d.mariadb {
		table += q.d.byID()
	}
	b.WriteString(`UPDATE ` + table + ` SET locked_by = '', locked_until = 0`)
	// setCase appends "col = CASE CAST(id AS SIGNED) WHEN ? THEN ? ...
	// ELSE col END" for the rows where include says the column changes, or
	// "col = ?" when it changes in every row to the same value (most
	// columns of a batch that was simply sent: the statement is shorter,
	// and the server evaluates no CASE for them).
	//
	// The CAST: id is BIGINT UNSIGNED and the ids are sent as (signed)
	// integer literals, and MariaDB compares the two in a CASE as DECIMAL.
	// Each row of a 200-row completion walks up to 200 WHENs for each such
	// column (the finish time, sent_at and provider_id of a sent batch);
	// as integers the whole UPDATE costs about a quarter less. Ids never
	// reach 2^63, where the cast would wrap.
	idInt := "CAST(id AS SIGNED)"
	if q.d.postgres {
		idInt = "id" // BIGINT already
	}
	setCase := func(col string, include func(u *rowUpdate) bool, value func(u *rowUpdate) any) {
		if same := value(&ups[0]); include(&ups[0]) && !slices.ContainsFunc(ups[1:], func(u rowUpdate) bool {
			return !include(&u) || value(&u) != same
		}) {
			b.WriteString(", " + col + " = ?")
			args = append(args, same)
			return
		}
		first := true
		for i := range ups {
			u := &ups[i]
			if !include(u) {
				continue
			}
			if first {
				b.WriteString(", " + col + " = CASE " + idInt)
				first = false
			}
			b.WriteString(" WHEN ? THEN ?")
			args = append(args, u.id, value(u))
		}
		if !first {
			b.WriteString(" ELSE " + col + " END")
		}
	}
	all := func(*rowUpdate) bool { return true }
	outcome := func(u *rowUpdate) bool { return u.hasOutcome }
	sent := func(u *rowUpdate) bool { return u.hasOutcome && u.status == StatusSent }
	failure := func(u *rowUpdate) bool { return u.hasOutcome && u.status != StatusSent }
	setCase("status", all, func(u *rowUpdate) any { return u.status })
	setCase("attempts", all, func(u *rowUpdate) any { return u.attempts })
	setCase("crashes", all, func(u *rowUpdate) any { return u.crashes })
	setCase("next_run", all, func(u *rowUpdate) any { return u.nextRun })
	setCase("maybe_delivered", all, func(u *rowUpdate) any { return boolInt(u.maybeDelivered) })
	setCase("last_kind", outcome, func(u *rowUpdate) any { return u.lastKind })
	setCase("member", outcome, func(u *rowUpdate) any { return u.member })
	setCase("sent_at", sent, func(u *rowUpdate) any { return u.sentAt })
	setCase("provider_id", sent, func(u *rowUpdate) any { return u.providerID })
	setCase("last_code", failure, func(u *rowUpdate) any { return u.lastCode })
	setCase("last_error", failure, func(u *rowUpdate) any { return u.lastError })
	setCase("last_rule", failure, func(u *rowUpdate) any { return u.lastRule })
	setCase("last_scope", failure, func(u *rowUpdate) any { return u.lastScope })

	b.WriteString(` WHERE id IN (` + placeholders(len(ups)) + `) AND ` + statusIs(StatusSending) + ` AND ` + fence)
	for _, u := range ups {
		args = append(args, u.id)
	}
	args = append(args, fenceArgs...)
	res, err := db.ExecContext(ctx, q.d.bounded(b.String()), args...)
	if err != nil {
		return 0, fmt.Errorf("queue: recording %d outcomes: %w", len(ups), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("queue: recording outcomes: rows affected: %w", err)
	}
	return int(n), nil
}

// writeEach writes ups with one statement per row, each statement text
// parsed once (reusing).
func (q *Queue) writeEach(ctx context.Context, db execer, ups []rowUpdate, fence string, fenceArgs []any) (int, error) {
	db = reusing(db)
	applied := 0
	for _, u := range ups {
		set := `status = ?, attempts = ?, crashes = ?, next_run = ?, maybe_delivered = ?, locked_by = '', locked_until = 0`
		args := []any{u.status, u.attempts, u.crashes, u.nextRun, boolInt(u.maybeDelivered)}
		if u.hasOutcome {
			set += `, last_kind = ?, member = ?`
			args = append(args, u.lastKind, u.member)
			if u.status == StatusSent {
				set += `, sent_at = ?, provider_id = ?`
				args = append(args, u.sentAt, u.providerID)
			} else {
				set += `, last_code = ?, last_error = ?, last_rule = ?, last_scope = ?`
				args = append(args, u.lastCode, u.lastError, u.lastRule, u.lastScope)
			}
		}
		args = append(append(args, u.id), fenceArgs...)
		res, err := db.ExecContext(ctx, `UPDATE `+q.table+` SET `+set+` WHERE id = ? AND `+statusIs(StatusSending)+` AND `+fence, args...)
		if err != nil {
			return applied, fmt.Errorf("queue: recording %d outcomes: %w", len(ups), err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return applied, fmt.Errorf("queue: recording outcomes: rows affected: %w", err)
		}
		applied += int(n)
	}
	return applied, nil
}

// extend is the heartbeat: it moves the lease of the rows ids claimed
// under token to leaseEnd (unix ms), fenced like complete, and returns how
// many rows it extended; the others were taken over.
func (q *Queue) extend(ctx context.Context, token string, ids []int64, leaseEnd int64) (int, error) {
	extended := 0
	err := q.write(ctx, func(db execer) error {
		for len(ids) > 0 {
			chunk := ids[:min(len(ids), maxBatchRows)]
			ids = ids[len(chunk):]
			args := []any{leaseEnd, leaseEnd}
			for _, id := range chunk {
				args = append(args, id)
			}
			args = append(args, token)
			stmt := `UPDATE ` + q.table + ` SET locked_until = ?, next_run = ? WHERE id IN (` + placeholders(len(chunk)) + `) AND ` + statusIs(StatusSending) + ` AND locked_by = ?`
			res, err := db.ExecContext(ctx, q.d.bounded(stmt), args...)
			if err != nil {
				return fmt.Errorf("queue: extending the lease of %d rows: %w", len(chunk), err)
			}
			n, _ := res.RowsAffected()
			extended += int(n)
		}
		return nil
	})
	return extended, err
}

// statusIs is the SQL condition "status = <s>", so that statements name
// the Status constants rather than their values.
func statusIs(s int) string { return "status = " + strconv.Itoa(s) }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

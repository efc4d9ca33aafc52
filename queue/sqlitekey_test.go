package queue

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keyedRow is a SQLite lane row's key and what it is made of.
type keyedRow struct{ rid, id, nice int64 }

// keyedRows reads a SQLite lane table's rows in the order they lie in it.
func keyedRows(t *testing.T, q *Queue) []keyedRow {
	t.Helper()
	rows, err := q.db.Query(`SELECT rid, id, nice FROM ` + q.table + ` ORDER BY rid`)
	require.NoError(t, err)
	defer rows.Close()
	var out []keyedRow
	for rows.Next() {
		var r keyedRow
		require.NoError(t, rows.Scan(&r.rid, &r.id, &r.nice))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// assertGrouped checks that rows (in the order they lie) are grouped by
// nice, highest priority first, in id order within a priority, each keyed
// by sqliteKey.
func assertGrouped(t *testing.T, rows []keyedRow) {
	t.Helper()
	for i, r := range rows {
		require.Equal(t, sqliteKey(r.nice, r.id), r.rid, "row %d", r.id)
		if i > 0 {
			p := rows[i-1]
			require.True(t, p.nice < r.nice || p.nice == r.nice && p.id < r.id,
				"row %d (nice %d) lies after row %d (nice %d)", r.id, r.nice, p.id, p.nice)
		}
	}
}

// TestSQLiteRowsOfAPriorityLieTogether: on SQLite the mail of one priority
// lies together in the table (so that a claim of it writes few pages),
// while ids keep the enqueue order across priorities, are never handed out
// twice, and every statement that names a row by id still finds it.
func TestSQLiteRowsOfAPriorityLieTogether(t *testing.T) {
	s := newSQLiteStore(t)
	ctx := context.Background()
	clock := newManualClock()
	q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, clock)

	tx, err := s.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	var ids []int64
	prio := map[int64]int{}
	for i := range 30 {
		p := []int{DefaultPriority, MaxPriority, MinPriority}[i%3]
		id, err := q.Enqueue(ctx, tx, testMessage("user"+strconv.Itoa(i)+"@example.com"), Priority(p))
		require.NoError(t, err)
		ids = append(ids, id)
		prio[id] = p
	}
	require.NoError(t, tx.Commit())
	require.True(t, slices.IsSorted(ids), "ids follow the enqueue order across priorities: %v", ids)
	require.Len(t, slices.Compact(slices.Clone(ids)), len(ids))

	rows := keyedRows(t, q)
	require.Len(t, rows, 30)
	assertGrouped(t, rows)
	for _, r := range rows {
		assert.EqualValues(t, MaxPriority-prio[r.id], r.nice, "row %d", r.id)
	}

	// The row an id names: Message, and the claim and outcome by key.
	m, err := q.Message(ctx, ids[1])
	require.NoError(t, err)
	assert.Equal(t, "user1@example.com", m.To.Address)
	tr, sent := sentMessages()
	w, err := NewWorker(q, tr, &WorkerOptions{Logger: quietLogger()})
	require.NoError(t, err)
	n, err := oneBatch(ctx, w, 100)
	require.NoError(t, err)
	require.Equal(t, 30, n)
	assert.Len(t, sent(), 30)
	for _, id := range ids {
		assert.Equal(t, StatusSent, readRow(t, q, id).Status, "row %d", id)
	}

	// The newest row deleted: its id is not handed out again.
	newest := ids[len(ids)-1]
	_, err = s.db.ExecContext(ctx, `DELETE FROM `+q.table+` WHERE id = ?`, newest)
	require.NoError(t, err)
	next, err := q.Enqueue(ctx, s.db, testMessage("later@example.com"), Priority(MaxPriority))
	require.NoError(t, err)
	assert.Greater(t, next, newest)

	// The key cannot disagree with the priority.
	_, err = s.db.ExecContext(ctx, `UPDATE `+q.table+` SET nice = 0 WHERE id = ?`, ids[0])
	require.ErrorContains(t, err, "CHECK constraint failed")
}

// TestSQLiteMigrationRekeysTheRows: the migration that keys SQLite's rows
// by priority keeps every row's id, priority and content, puts the rows
// of a priority together, hands out no id again that the old table gave,
// even one whose row was deleted, and leaves the application's views and
// triggers on the table working.
func TestSQLiteMigrationRekeysTheRows(t *testing.T) {
	s := newSQLiteStore(t)
	ctx := context.Background()
	d, err := detectDialect(ctx, s.db)
	require.NoError(t, err)
	const table = "mail_v13"
	for _, m := range migrations {
		if m.version <= 13 {
			for _, stmt := range migrationSQL(d, m, table) {
				_, err := s.db.ExecContext(ctx, stmt)
				require.NoError(t, err, stmt)
			}
		}
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO `+d.quote(schemaTable)+` (tbl, version, applied_at) VALUES (?, 13, 0)`, table)
	require.NoError(t, err)
	// Six rows at three priorities, in turn; then the newest deleted, as
	// Cleanup or an operator would.
	for i := range 6 {
		_, err := s.db.ExecContext(ctx, `INSERT INTO `+d.quote(table)+` (next_run, created_at, message_id, from_addr, to_addr, subject, text_body, html_body, headers, nice)
  VALUES (0, 0, ?, 'shop@example.com', ?, 'before', 'inline text', '', '[]', ?)`, "m"+strconv.Itoa(i)+"@x", "old"+strconv.Itoa(i)+"@example.com", []int{4, 0, 9}[i%3])
		require.NoError(t, err)
	}
	_, err = s.db.ExecContext(ctx, `DELETE FROM `+d.quote(table)+` WHERE id = 6`)
	require.NoError(t, err)
	// The application's own view and trigger on the table.
	_, err = s.db.ExecContext(ctx, `CREATE VIEW app_pending AS SELECT id, to_addr FROM `+d.quote(table)+` WHERE status = 0`)
	require.NoError(t, err)
	_, err = s.db.ExecContext(ctx, `CREATE TABLE app_audit (mail_id INTEGER)`)
	require.NoError(t, err)
	_, err = s.db.ExecContext(ctx, `CREATE TRIGGER app_audit_insert AFTER INSERT ON `+d.quote(table)+` BEGIN INSERT INTO app_audit VALUES (NEW.id); END`)
	require.NoError(t, err)

	require.NoError(t, Migrate(ctx, s.db, table))
	q := newQueue(t, s.db, Lane{Table: table, RecipientLimit: NoLimit}, nil)
	rows := keyedRows(t, q)
	require.Len(t, rows, 5)
	assertGrouped(t, rows)
	for _, r := range rows {
		assert.EqualValues(t, []int{4, 0, 9}[(r.id-1)%3], r.nice, "row %d keeps its priority", r.id)
		m, err := q.Message(ctx, r.id)
		require.NoError(t, err)
		assert.Equal(t, "old"+strconv.FormatInt(r.id-1, 10)+"@example.com", m.To.Address)
		assert.Equal(t, "inline text", m.Text)
	}

	id, err := q.Enqueue(ctx, s.db, testMessage("new@example.com"))
	require.NoError(t, err)
	assert.EqualValues(t, 7, id, "the deleted row's id 6 is not handed out again")
	assertGrouped(t, keyedRows(t, q))

	var pending, audited int
	require.NoError(t, s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM app_pending`).Scan(&pending))
	assert.Equal(t, 6, pending, "the view reads the rebuilt table")
	require.NoError(t, s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM app_audit WHERE mail_id = ?`, id).Scan(&audited))
	assert.Equal(t, 1, audited, "the trigger was created again")
}

package queue

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sentMessages is a transport that keeps what it was given.
func sentMessages() (*funcTransport, func() map[string]transport.Message) {
	var mu sync.Mutex
	got := map[string]transport.Message{}
	tr := newFuncTransport(func(_ context.Context, m *transport.Message) (transport.Receipt, error) {
		mu.Lock()
		defer mu.Unlock()
		got[m.To.Address] = *m
		return transport.Receipt{MessageID: "<" + m.MessageID + ">"}, nil
	})
	return tr, func() map[string]transport.Message {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
}

// TestBodiesReachTheTransport: the mail a worker sends, and the one
// Message shows, has the bodies and headers it was enqueued with. On
// SQLite they are stored once in the lane's bodies table and the row keeps
// none of them, so that a claim or a completion does not rewrite them.
func TestBodiesReachTheTransport(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
		m := testMessage("ann@example.com")
		m.Text = "plain ünïcode\r\nline two"
		m.HTML = "<p>" + string(bigText(5000)) + "</p>"
		id, err := q.Enqueue(ctx, s.db, m)
		require.NoError(t, err)

		if s.name == "sqlite" {
			var text, html, headers string
			var bodyID int64
			require.NoError(t, s.db.QueryRow(`SELECT text_body, html_body, headers, body_id FROM `+q.table+` WHERE id = ?`, id).Scan(&text, &html, &headers, &bodyID))
			assert.Equal(t, []string{"", "", ""}, []string{text, html, headers}, "the row keeps no bodies")
			require.NotZero(t, bodyID)
			require.NoError(t, s.db.QueryRow(`SELECT text_body, html_body FROM `+q.bodies+` WHERE id = ?`, bodyID).Scan(&text, &html))
			assert.Equal(t, m.Text, text)
			assert.Equal(t, m.HTML, html)
		}

		shown, err := q.Message(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, m.Text, shown.Text)
		assert.Equal(t, m.HTML, shown.HTML)
		assert.Equal(t, m.Headers, shown.Headers)

		tr, sent := sentMessages()
		w, err := NewWorker(q, tr, &WorkerOptions{Logger: quietLogger()})
		require.NoError(t, err)
		n, err := oneBatch(ctx, w, 10)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		got := sent()["ann@example.com"]
		assert.Equal(t, m.Text, got.Text)
		assert.Equal(t, m.HTML, got.HTML)
		assert.Equal(t, m.Headers, got.Headers)
		assert.Equal(t, m.Subject, got.Subject)
	})
}

func bigText(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}

// TestFailedEnqueueLeavesNoBodies: on SQLite an enqueue writes the bodies,
// then the row; when the row cannot be written, the bodies are taken back,
// so a caller who commits anyway keeps nothing of the enqueue.
func TestFailedEnqueueLeavesNoBodies(t *testing.T) {
	s := newSQLiteStore(t)
	ctx := context.Background()
	q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
	_, err := s.db.Exec(`CREATE TRIGGER refuse_mail BEFORE INSERT ON ` + q.table + ` BEGIN SELECT RAISE(ABORT, 'refused by a test trigger'); END`)
	require.NoError(t, err)

	tx, err := s.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, tx, testMessage("ann@example.com"))
	require.ErrorContains(t, err, "refused by a test trigger")
	require.NoError(t, tx.Commit(), "the caller commits anyway")
	assert.Equal(t, 0, countRows(t, s.db, q.table, "1=1"))
	assert.Equal(t, 0, countRows(t, s.db, q.bodies, "1=1"), "no bodies without their mail")
}

// TestMailWithoutItsBodiesIsNeverSent: a row whose bodies were deleted by
// hand from the SQLite bodies table stays unsent (its mail would go out
// empty), Message says what is wrong, and the other mail is sent.
func TestMailWithoutItsBodiesIsNeverSent(t *testing.T) {
	s := newSQLiteStore(t)
	ctx := context.Background()
	q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
	ids := enqueueN(t, q, 2)
	_, err := s.db.Exec(`DELETE FROM `+q.bodies+` WHERE id = (SELECT body_id FROM `+q.table+` WHERE id = ?)`, ids[0])
	require.NoError(t, err)

	_, err = q.Message(ctx, ids[0])
	assert.ErrorContains(t, err, "bodies are missing")
	tr, sent := sentMessages()
	w, err := NewWorker(q, tr, &WorkerOptions{Logger: quietLogger()})
	require.NoError(t, err)
	n, err := oneBatch(ctx, w, 10)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Contains(t, sent(), "user1@example.com")
	assert.Equal(t, StatusPending, readRow(t, q, ids[0]).Status)
}

// TestUpgradedSQLiteTableSendsItsInlineBodies: rows enqueued before schema
// version 8 keep their bodies in the row, and are sent with them after the
// upgrade, beside new rows whose bodies are in the bodies table; Cleanup
// deletes both kinds with their bodies.
func TestUpgradedSQLiteTableSendsItsInlineBodies(t *testing.T) {
	s := newSQLiteStore(t)
	ctx := context.Background()
	d, err := detectDialect(ctx, s.db)
	require.NoError(t, err)
	const table = "mail_v7"
	for _, m := range migrations {
		if m.version <= 7 {
			for _, stmt := range migrationSQL(d, m, table) {
				_, err := s.db.ExecContext(ctx, stmt)
				require.NoError(t, err, stmt)
			}
		}
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO `+d.quote(schemaTable)+` (tbl, version, applied_at) VALUES (?, 7, 0)`, table)
	require.NoError(t, err)
	_, err = s.db.ExecContext(ctx, `INSERT INTO `+d.quote(table)+` (next_run, created_at, message_id, from_addr, to_addr, subject, text_body, html_body, headers)
  VALUES (0, 0, 'old@x', 'shop@example.com', 'old@example.com', 'before', 'inline text', '<p>inline</p>', '[["X-Old","1"]]')`)
	require.NoError(t, err)
	require.NoError(t, Migrate(ctx, s.db, table))

	clock := newManualClock()
	q := newQueue(t, s.db, Lane{Table: table, RecipientLimit: NoLimit}, clock)
	_, err = q.Enqueue(ctx, s.db, testMessage("new@example.com"))
	require.NoError(t, err)
	old, err := q.Message(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, "inline text", old.Text)

	tr, sent := sentMessages()
	w, err := NewWorker(q, tr, &WorkerOptions{Logger: quietLogger()})
	require.NoError(t, err)
	n, err := oneBatch(ctx, w, 10)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	got := sent()
	assert.Equal(t, "inline text", got["old@example.com"].Text)
	assert.Equal(t, "<p>inline</p>", got["old@example.com"].HTML)
	assert.Equal(t, []transport.Header{{Name: "X-Old", Value: "1"}}, got["old@example.com"].Headers)
	assert.Equal(t, testMessage("x").Text, got["new@example.com"].Text)

	clock.Advance(31 * 24 * time.Hour)
	deleted, err := q.Cleanup(ctx, Retention{}, nil)
	require.NoError(t, err)
	assert.EqualValues(t, 2, deleted)
	assert.Equal(t, 0, countRows(t, s.db, q.bodies, "1=1"), "the new mail's bodies went with it")
}

package statuspage_test

import (
	"context"
	"database/sql"
	"net/mail"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mailspool/mailspool/internal/placeholder"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/queue/dburl/dburltest"
	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/require"

	_ "modernc.org/sqlite" // the tests open SQLite databases, as a program would
)

// forEachStore runs f on a fresh, migrated SQLite file, MariaDB database
// and PostgreSQL database. Under CI=true an unreachable server fails the
// test; elsewhere it skips that third, saying how to start the server.
func forEachStore(t *testing.T, f func(t *testing.T, db *sql.DB)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { f(t, sqliteDB(t)) })
	t.Run("mariadb", func(t *testing.T) { f(t, mariaDB(t)) })
	t.Run("postgres", func(t *testing.T) { f(t, postgresDB(t)) })
}

func sqliteDB(t testing.TB) *sql.DB {
	t.Helper()
	db, err := dburl.Open("sqlite:" + filepath.Join(t.TempDir(), "q.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	require.NoError(t, queue.Migrate(context.Background(), db))
	return db
}

func mariaDB(t testing.TB) *sql.DB {
	t.Helper()
	return serverDB(t, dburltest.MariaDB)
}

func postgresDB(t testing.TB) *sql.DB {
	t.Helper()
	return serverDB(t, dburltest.Postgres)
}

// serverDB creates a migrated database of its own on server, dropped at
// the end of the test.
func serverDB(t testing.TB, server dburltest.Server) *sql.DB {
	t.Helper()
	db, err := dburl.Open(server.Fresh(t))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	require.NoError(t, queue.Migrate(context.Background(), db))
	return db
}

// seeded is what seed put in the lane, by recipient.
type seeded struct {
	q   *queue.Queue
	ids map[string]int64
}

// seed fills lane "transactional" (table mail_queue) with seven mails:
//
//	ann@example.com   sent 10 minutes ago
//	bob@example.com   failed 5 minutes ago, permanent 550 about the recipient, by rule smtp-5.1.1 (the reply quotes the address)
//	carl@example.com  retry, temporary 421, due 5 minutes ago (the oldest due)
//	dora@example.com  pending, due now
//	eve@example.com   sending, its lease ends in a minute
//	fred@example.com  failed 20 minutes ago, permanent 550 by rule smtp-5.1.1
//	gina@example.com  sent 30 minutes ago
//
// so: backlog 3 (1 pending, 1 retry, 1 sending), sent 2 and failed 2 in the
// last hour, failure rate 50 %.
func seed(t testing.TB, db *sql.DB) seeded {
	t.Helper()
	ctx := context.Background()
	q, err := queue.New(ctx, db, queue.Lane{Name: "transactional"}, nil)
	require.NoError(t, err)
	s := seeded{q: q, ids: map[string]int64{}}
	now := time.Now()
	ms := func(d time.Duration) int64 { return now.Add(d).UnixMilli() }
	for _, m := range []struct {
		to     string
		status int
		kind   string
		code   int
		rule   string
		errTxt string
		next   int64
	}{
		{"ann", queue.StatusSent, "sent", 250, "", "", ms(-10 * time.Minute)},
		{"bob", queue.StatusFailed, "permanent", 550, "smtp-5.1.1", "550 5.1.1 <bob@example.com>: Recipient address rejected: no such user", ms(-5 * time.Minute)},
		{"carl", queue.StatusRetry, "temporary", 421, "smtp-4xx", "421 4.7.0 try again later", ms(-5 * time.Minute)},
		{"dora", queue.StatusPending, "", 0, "", "", ms(0)},
		{"eve", queue.StatusSending, "", 0, "", "", ms(time.Minute)},
		{"fred", queue.StatusFailed, "permanent", 550, "smtp-5.1.1", "550 5.1.1 user unknown", ms(-20 * time.Minute)},
		{"gina", queue.StatusSent, "sent", 250, "", "", ms(-30 * time.Minute)},
	} {
		addr := m.to + "@example.com"
		id, err := q.Enqueue(ctx, db, &transport.Message{
			From:    mail.Address{Name: "Shop", Address: "noreply@shop.example"},
			To:      mail.Address{Name: strings.ToUpper(m.to[:1]) + m.to[1:] + " Doe", Address: addr},
			Subject: "Welcome, " + addr,
			Text:    "Hello " + addr + ",\nyour account is ready.",
			HTML:    "<p>Hello <b>" + addr + "</b></p><script>alert(1)</script>",
			Headers: []transport.Header{{Name: "List-Unsubscribe", Value: "<mailto:unsub@shop.example?subject=" + addr + ">"}},
		}, queue.Template("welcome"))
		require.NoError(t, err)
		scope := ""
		if m.code == 550 {
			scope = "recipient"
		}
		_, err = db.Exec(placeholder.For(db, `UPDATE mail_queue SET status = ?, attempts = ?, last_kind = ?, last_code = ?, last_rule = ?, last_scope = ?, last_error = ?, next_run = ? WHERE id = ?`),
			m.status, min(m.status, 1), m.kind, m.code, m.rule, scope, m.errTxt, m.next, id)
		require.NoError(t, err)
		s.ids[m.to] = id
	}
	return s
}

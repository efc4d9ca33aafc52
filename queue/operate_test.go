package queue

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// seedOps enqueues six mails a minute apart and puts them in known states:
//
//	1 ann@example.com  welcome  sent
//	2 Bob@Example.com  reset    failed, permanent 550
//	3 ann@EXAMPLE.com  welcome  retry, temporary 421
//	4 carl@example.com welcome  sending
//	5 ann@example.com  reset    failed, temporary 451 (out of attempts)
//	6 dora@example.com welcome  pending
func seedOps(t *testing.T, s store, clock *manualClock) (*Queue, []int64) {
	t.Helper()
	ctx := context.Background()
	q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, clock)
	var ids []int64
	for _, m := range []struct{ to, template string }{
		{"ann@example.com", "welcome"}, {"Bob@Example.com", "reset"}, {"ann@EXAMPLE.com", "welcome"},
		{"carl@example.com", "welcome"}, {"ann@example.com", "reset"}, {"dora@example.com", "welcome"},
	} {
		id, err := q.Enqueue(ctx, s.db, testMessage(m.to), Template(m.template))
		require.NoError(t, err)
		ids = append(ids, id)
		clock.Advance(time.Minute)
	}
	now := clock.Now().UnixMilli()
	set := func(id int64, status, attempts int, kind string, code int, nextRun int64) {
		t.Helper()
		_, err := s.db.Exec(rebindFor(t, s.db, `UPDATE `+q.table+` SET status = ?, attempts = ?, last_kind = ?, last_code = ?, last_error = ?, next_run = ? WHERE id = ?`),
			status, attempts, kind, code, kind+" error", nextRun, id)
		require.NoError(t, err)
	}
	set(ids[0], StatusSent, 1, "sent", 0, now-1000)
	set(ids[1], StatusFailed, 1, "permanent", 550, now-2000)
	set(ids[2], StatusRetry, 2, "temporary", 421, now+60_000)
	set(ids[3], StatusSending, 1, "", 0, now+30_000)
	set(ids[4], StatusFailed, 5, "temporary", 451, now-3000)
	return q, ids
}

func listIDs(t *testing.T, q *Queue, o ListOptions) []int64 {
	t.Helper()
	rows, err := q.List(context.Background(), o)
	require.NoError(t, err)
	ids := []int64{}
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	return ids
}

func TestListAndShow(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		start := clock.Now()
		q, ids := seedOps(t, s, clock)
		require.Equal(t, []int64{1, 2, 3, 4, 5, 6}, ids)

		assert.Equal(t, []int64{6, 5, 4, 3, 2, 1}, listIDs(t, q, ListOptions{}), "newest first")
		assert.Equal(t, []int64{6, 5}, listIDs(t, q, ListOptions{Limit: 2}))
		assert.Equal(t, []int64{4, 3}, listIDs(t, q, ListOptions{Limit: 2, Before: 5}), "the next page")
		assert.Equal(t, []int64{5, 3, 1}, listIDs(t, q, ListOptions{Filter: Filter{To: "ANN@example.com"}}), "any letter case")
		assert.Equal(t, []int64{2}, listIDs(t, q, ListOptions{Filter: Filter{To: "bob@example.com"}}))
		assert.Equal(t, []int64{}, listIDs(t, q, ListOptions{Filter: Filter{To: "nobody@example.com"}}))
		assert.Equal(t, []int64{3, 1}, listIDs(t, q, ListOptions{Filter: Filter{To: "ann@example.com", Template: "welcome"}}))
		assert.Equal(t, []int64{5, 2}, listIDs(t, q, ListOptions{Filter: Filter{Status: "failed"}}))
		assert.Equal(t, []int64{2}, listIDs(t, q, ListOptions{Filter: Filter{Status: "failed", Kind: "permanent"}}))
		assert.Equal(t, []int64{6, 5, 4}, listIDs(t, q, ListOptions{Filter: Filter{Since: start.Add(3 * time.Minute)}}))
		_, err := q.List(ctx, ListOptions{Filter: Filter{Status: "lost"}})
		assert.ErrorContains(t, err, `unknown status "lost"`)
		_, err = q.List(ctx, ListOptions{Limit: 1001})
		assert.ErrorContains(t, err, "limit 1001 out of range")

		n, err := q.Count(ctx, Filter{Status: "failed"})
		require.NoError(t, err)
		assert.EqualValues(t, 2, n)

		r, err := q.Row(ctx, 2)
		require.NoError(t, err)
		assert.Equal(t, "failed", r.Status)
		assert.Equal(t, "Bob@example.com", r.To, "the domain normalized at enqueue")
		assert.Equal(t, "noreply@shop.example", r.From)
		assert.Equal(t, "permanent", r.LastKind)
		assert.Equal(t, 550, r.LastCode)
		assert.Equal(t, start.Add(6*time.Minute-2*time.Second).UnixMilli(), r.FinishedAt.UnixMilli())
		assert.True(t, r.DueAt.IsZero() && r.LeaseEnds.IsZero() && r.SentAt.IsZero())
		js, err := json.Marshal(r)
		require.NoError(t, err)
		for _, absent := range []string{"due_at", "lease_ends", "sent_at", "not_after", "provider_id", "history", "0001-01-01"} {
			assert.NotContains(t, string(js), absent, "nothing that has not happened")
		}
		assert.Contains(t, string(js), `"finished_at":`)
		assert.Contains(t, string(js), `"last_code":550`)

		r, err = q.Row(ctx, 4)
		require.NoError(t, err)
		assert.False(t, r.LeaseEnds.IsZero(), "a sending row shows its lease")

		m, err := q.Message(ctx, 2)
		require.NoError(t, err)
		want := testMessage("Bob@Example.com")
		assert.Equal(t, want.Subject, m.Subject)
		assert.Equal(t, want.Text, m.Text)
		assert.Equal(t, want.HTML, m.HTML)
		assert.Equal(t, want.Headers, m.Headers)
		want.To.Address = "Bob@example.com" // the domain normalized, the local part as written
		assert.Equal(t, want.To, m.To)
		_, err = q.Message(ctx, 99)
		assert.ErrorIs(t, err, ErrNotFound)
	})
}

func TestRetryAndCancel(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		q, _ := seedOps(t, s, clock)
		stamp := clock.Now().UTC().Format(time.RFC3339)

		n, err := q.Retry(ctx, 2, 4, 6, 99)
		assert.EqualValues(t, 1, n, "only the failed mail")
		assert.ErrorIs(t, err, ErrWrongState)
		assert.ErrorIs(t, err, ErrNotFound)
		assert.ErrorContains(t, err, "mail 4 is sending, not retry or failed")
		assert.ErrorContains(t, err, "mail 6 is pending, not retry or failed")
		assert.ErrorContains(t, err, "id 99")
		r, err := q.Row(ctx, 2)
		require.NoError(t, err)
		assert.Equal(t, "pending", r.Status)
		assert.Equal(t, 0, r.Attempts, "fresh attempts")
		assert.Equal(t, clock.Now().UnixMilli(), r.DueAt.UnixMilli(), "due now")
		assert.Equal(t, "permanent", r.LastKind, "the last outcome stays until the next attempt")
		assert.Equal(t, []string{stamp + " retry: was failed, 1 of 5 attempts, last permanent 550"}, r.History)
		assert.Equal(t, "sending", mustRow(t, q, 4).Status, "a sending row is left alone")

		n, err = q.Cancel(ctx, 3, 1, 4)
		assert.EqualValues(t, 1, n)
		assert.ErrorIs(t, err, ErrWrongState)
		assert.ErrorContains(t, err, "mail 1 is sent, not pending or retry")
		assert.ErrorContains(t, err, "mail 4 is sending")
		r = mustRow(t, q, 3)
		assert.Equal(t, "failed", r.Status)
		assert.Equal(t, "cancelled", r.LastKind)
		assert.Equal(t, []string{stamp + " cancel: was retry, 2 of 5 attempts, last temporary 421"}, r.History)

		st, err := q.Stats(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 1, st.FailedLastHour, "a cancelled mail is no delivery failure")

		// Retry every failed mail of template reset: 5, not 3 (welcome,
		// cancelled) nor 2 (pending again).
		n, err = q.RetryFailed(ctx, Filter{Template: "reset"})
		require.NoError(t, err)
		assert.EqualValues(t, 1, n)
		assert.Equal(t, "pending", mustRow(t, q, 5).Status)
		assert.Equal(t, "failed", mustRow(t, q, 3).Status)

		// A cancelled mail can be retried; its history keeps both lines.
		clock.Advance(time.Minute)
		n, err = q.Retry(ctx, 3)
		require.NoError(t, err)
		assert.EqualValues(t, 1, n)
		r = mustRow(t, q, 3)
		assert.Len(t, r.History, 2)
		assert.True(t, strings.HasSuffix(r.History[1], "retry: was failed, 2 of 5 attempts, last cancelled"), r.History[1])
	})
}

func mustRow(t *testing.T, q *Queue, id int64) Row {
	t.Helper()
	r, err := q.Row(context.Background(), id)
	require.NoError(t, err)
	return r
}

func TestAppendHistoryDropsTheOldestLines(t *testing.T) {
	h := ""
	for i := range 40 {
		h = appendHistory(h, strings.Repeat("x", 40)+" "+string(rune('a'+i%26)))
	}
	assert.LessOrEqual(t, len(h), maxHistory)
	lines := strings.Split(h, "\n")
	assert.Equal(t, 23, len(lines), "23 lines of 42 bytes and their 22 newlines fit in 1024, 24 would not")
	assert.True(t, strings.HasSuffix(lines[len(lines)-1], " n"), "the newest line is kept") // i = 39 → 'a'+13
}

func TestPauseAndResume(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		q := newQueue(t, s.db, Lane{}, clock)
		other := newQueue(t, s.db, Lane{Table: "mail_other"}, clock)
		require.NoError(t, Migrate(ctx, s.db, "mail_other"))

		ps, err := q.Paused(ctx)
		require.NoError(t, err)
		assert.Empty(t, ps)

		require.NoError(t, q.Pause(ctx, "provider incident #42"))
		ps, err = q.Paused(ctx)
		require.NoError(t, err)
		require.Len(t, ps, 1)
		assert.Equal(t, Pause{By: "operator", Since: clock.Now(), Reason: "provider incident #42"}, withUTC(ps[0]))
		paused, since, reason, err := q.operatorPaused(ctx)
		require.NoError(t, err)
		assert.True(t, paused)
		assert.Equal(t, clock.Now().UnixMilli(), since.UnixMilli())
		assert.Equal(t, "provider incident #42", reason)
		ps, err = other.Paused(ctx)
		require.NoError(t, err)
		assert.Empty(t, ps, "a pause is per lane")

		require.NoError(t, q.holdByBreaker(ctx, clock.Now().Add(time.Minute), "connection: dial tcp: refused"))
		ps, err = q.Paused(ctx)
		require.NoError(t, err)
		require.Len(t, ps, 2)
		assert.Equal(t, Pause{By: "breaker", Until: clock.Now().Add(time.Minute), Reason: "connection: dial tcp: refused"}, withUTC(ps[1]))

		require.NoError(t, q.Resume(ctx))
		clock.Advance(2 * time.Minute)
		ps, err = q.Paused(ctx)
		require.NoError(t, err)
		assert.Empty(t, ps, "resumed, and the breaker's hold has run out")
		paused, _, _, err = q.operatorPaused(ctx)
		require.NoError(t, err)
		assert.False(t, paused)
	})
}

func withUTC(p Pause) Pause {
	if !p.Since.IsZero() {
		p.Since = p.Since.UTC()
	}
	if !p.Until.IsZero() {
		p.Until = p.Until.UTC()
	}
	return p
}

func TestSchemaSQLAndTableVersion(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		v, err := TableVersion(ctx, s.db, DefaultTable)
		require.NoError(t, err)
		assert.Equal(t, SchemaVersion(), v)
		v, err = TableVersion(ctx, s.db, "mail_never")
		require.NoError(t, err)
		assert.Equal(t, 0, v)

		// The printed DDL, applied by hand, makes a table Migrate and
		// CheckSchema accept, and enqueue works on it.
		store := map[string]string{"sqlite": "sqlite", "mariadb": "mysql", "postgres": "postgres"}[s.name]
		stmts, err := SchemaSQL(store, "mail_printed", 0)
		require.NoError(t, err)
		for _, stmt := range stmts {
			_, err := s.db.ExecContext(ctx, stmt)
			require.NoError(t, err, stmt)
		}
		require.NoError(t, CheckSchema(ctx, s.db, "mail_printed"))
		require.NoError(t, Migrate(ctx, s.db, "mail_printed"))
		q := newQueue(t, s.db, Lane{Table: "mail_printed"}, nil)
		_, err = q.Enqueue(ctx, s.db, testMessage("ann@example.com"))
		require.NoError(t, err)
		assert.Len(t, listIDs(t, q, ListOptions{Filter: Filter{To: "Ann@example.com"}}), 1)

		up, err := SchemaSQL(store, "mail_printed", 1)
		require.NoError(t, err)
		assert.Less(t, len(up), len(stmts), "from version 1 only the later steps")
		none, err := SchemaSQL(store, "mail_printed", SchemaVersion())
		require.NoError(t, err)
		assert.Empty(t, none)
		_, err = SchemaSQL("oracle", "mail_printed", 0)
		assert.ErrorContains(t, err, `unknown store "oracle"`)
	})
}

// Migrating a table of version 1 with rows in it to the current version
// makes those rows findable by recipient, and running it again is a no-op.
func TestMigrateFromVersion1(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		d, err := detectDialect(ctx, s.db)
		require.NoError(t, err)
		for _, stmt := range migrationSQL(d, migrations[0], "mail_old") {
			_, err := s.db.ExecContext(ctx, stmt)
			require.NoError(t, err)
		}
		_, err = s.db.ExecContext(ctx, `INSERT INTO `+d.quote(schemaTable)+` (tbl, version, applied_at) VALUES ('mail_old', 1, 0)`)
		require.NoError(t, err)
		_, err = s.db.ExecContext(ctx, `INSERT INTO `+d.quote("mail_old")+` (next_run, created_at, message_id, from_addr, to_addr, subject, text_body, html_body, headers)
  VALUES (0, 0, 'm@x', 'a@example.com', 'Old@Example.com', 's', 't', '', '[]')`)
		require.NoError(t, err)
		require.NoError(t, Migrate(ctx, s.db, "mail_old"))
		// An interrupted run re-runs every statement of version 4 (ours).
		var v4 migration
		for _, m := range migrations {
			if m.version == 4 {
				v4 = m
			}
		}
		for _, stmt := range migrationSQL(d, v4, "mail_old") {
			_, err := s.db.ExecContext(ctx, stmt)
			if err != nil {
				assert.True(t, alreadyThere(err), "%s: %v", stmt, err)
			}
		}
		require.NoError(t, Migrate(ctx, s.db, "mail_old"))
		q := newQueue(t, s.db, Lane{Table: "mail_old"}, nil)
		assert.Equal(t, []int64{1}, listIDs(t, q, ListOptions{Filter: Filter{To: "old@example.com"}}))
	})
}

func TestMigrationsInOrder(t *testing.T) {
	for i := 1; i < len(migrations); i++ {
		assert.Greater(t, migrations[i].version, migrations[i-1].version, "migrations must be listed in increasing version order")
	}
}

// A worker stops claiming within one poll of an operator's pause, another
// process's Pause included, and claims again after Resume; a breaker's
// pause shows in Paused while it lasts.
func TestWorkerObeysPause(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		lane := Lane{RecipientLimit: NoLimit, Retry: RetryPolicy{BreakerThreshold: 2, BreakerPause: time.Hour, BreakerMaxPause: time.Hour}}
		admin := newQueue(t, s.open(t), lane, nil) // the operator's process
		require.NoError(t, admin.Pause(ctx, "maintenance"))

		var failing atomic.Bool
		tr := newFuncTransport(func(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
			if failing.Load() {
				return transport.Receipt{}, &transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane, Err: errors.New("dial tcp: connection refused")}
			}
			return transport.Receipt{MessageID: m.MessageID}, nil
		})
		var logs problemLog
		w, err := NewWorker(newQueue(t, s.db, lane, nil), tr, &WorkerOptions{PollInterval: 20 * time.Millisecond, Logger: logs.logger(), CleanupInterval: -1})
		require.NoError(t, err)
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(runCtx) }()
		defer func() { cancel(); require.NoError(t, <-done) }()

		paused := func() int {
			for _, l := range logs.Lines() {
				if strings.Contains(l, "lane paused by an operator") {
					return 1
				}
			}
			return 0
		}
		waitProgress(t, "the worker sees the pause", 10*time.Second, 1, paused)
		enqueueN(t, admin, 3)
		time.Sleep(10 * w.opts.PollInterval) // ten polls
		assert.EqualValues(t, 0, tr.total.Load(), "nothing is claimed while paused")
		st, err := admin.Stats(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 3, st.Pending, "enqueue goes on while paused")

		require.NoError(t, admin.Resume(ctx))
		waitProgress(t, "sends after resume", 10*time.Second, 3, func() int { return int(tr.total.Load()) })

		failing.Store(true)
		enqueueN(t, admin, 2)
		waitProgress(t, "the breaker's pause is recorded", 10*time.Second, 1, func() int {
			ps, err := admin.Paused(ctx)
			require.NoError(t, err)
			return len(ps)
		})
		ps, err := admin.Paused(ctx)
		require.NoError(t, err)
		require.Len(t, ps, 1)
		assert.Equal(t, "breaker", ps[0].By)
		assert.Equal(t, "2 or more connection failures in a row", ps[0].Reason)
		assert.WithinDuration(t, time.Now().Add(time.Hour), ps[0].Until, time.Minute)
	})
}

package alert

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailspool/mailspool/classify"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/queue/dburl/dburltest"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/composite"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// forEachStore runs f on a fresh, migrated SQLite file and MariaDB
// database. Under CI=true an unreachable MariaDB fails the test; elsewhere
// its half is skipped with a line saying how to start it.
func forEachStore(t *testing.T, f func(t *testing.T, db *sql.DB)) {
	t.Run("sqlite", func(t *testing.T) {
		db, err := dburl.Open("sqlite:" + filepath.Join(t.TempDir(), "q.db"))
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		require.NoError(t, queue.Migrate(context.Background(), db))
		f(t, db)
	})
	t.Run("mariadb", func(t *testing.T) {
		db, err := dburl.Open(dburltest.MariaDB.Fresh(t))
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		require.NoError(t, queue.Migrate(context.Background(), db))
		f(t, db)
	})
}

func newQueue(t *testing.T, db *sql.DB) *queue.Queue {
	t.Helper()
	q, err := queue.New(context.Background(), db, queue.Lane{Name: "transactional", RecipientLimit: queue.NoLimit}, nil)
	require.NoError(t, err)
	return q
}

func enqueue(t *testing.T, q *queue.Queue, db *sql.DB, n int) {
	t.Helper()
	tx, err := db.Begin()
	require.NoError(t, err)
	for range n {
		_, err := q.Enqueue(context.Background(), tx, &transport.Message{
			From: mail.Address{Address: "noreply@shop.example"}, To: mail.Address{Address: "ann@example.com"}, Subject: "s", Text: "t",
		})
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit())
}

// webhook is an httptest server that fails the first failFirst posts with
// 500 and records the bodies it accepts.
type webhook struct {
	*httptest.Server
	mu       sync.Mutex
	posts    int
	accepted []map[string]any
}

func newWebhook(t *testing.T, failFirst int) *webhook {
	w := &webhook{}
	w.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.mu.Lock()
		defer w.mu.Unlock()
		w.posts++
		if w.posts <= failFirst {
			http.Error(rw, "try later", http.StatusInternalServerError)
			return
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil || r.Header.Get("Content-Type") != "application/json" {
			http.Error(rw, "not JSON", http.StatusBadRequest)
			return
		}
		w.accepted = append(w.accepted, m)
	}))
	t.Cleanup(w.Close)
	return w
}

func (w *webhook) got() (int, []map[string]any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.posts, append([]map[string]any(nil), w.accepted...)
}

// newAlerter watches q's lane with th; its retries wait milliseconds.
func newAlerter(t *testing.T, db *sql.DB, q *queue.Queue, th Thresholds, opts Options) *Alerter {
	t.Helper()
	if opts.Interval == 0 {
		opts.Interval = 100 * time.Millisecond
	}
	a, err := New(db, opts)
	require.NoError(t, err)
	a.client = newClient(5 * time.Millisecond)
	require.NoError(t, a.Lane(q, th))
	return a
}

func TestOneAlertAndOneRecoveryAcrossProcesses(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *sql.DB) {
		ctx := context.Background()
		hook := newWebhook(t, 2)
		q := newQueue(t, db)
		// Two worker processes of the same lane, on the same database.
		a1 := newAlerter(t, db, q, Thresholds{Backlog: 2}, Options{WebhookURL: hook.URL + "/hook", Worker: "w1"})
		a2 := newAlerter(t, db, q, Thresholds{Backlog: 2}, Options{WebhookURL: hook.URL + "/hook", Worker: "w2"})

		enqueue(t, q, db, 3) // backlog 3 > 2
		for range 3 {
			require.NoError(t, a1.Check(ctx))
			require.NoError(t, a2.Check(ctx))
		}
		posts, accepted := hook.got()
		require.Len(t, accepted, 1, "one alert while the condition lasts, from either process")
		assert.Equal(t, 3, posts, "two failed posts retried, then accepted")
		assert.Equal(t, "transactional", accepted[0]["lane"])
		assert.Equal(t, "backlog", accepted[0]["condition"])
		assert.Equal(t, "firing", accepted[0]["state"])
		assert.Equal(t, 3.0, accepted[0]["value"])
		assert.Equal(t, 2.0, accepted[0]["threshold"])

		_, err := db.Exec(`UPDATE mail_queue SET status = ?`, queue.StatusSent)
		require.NoError(t, err)
		// The recovery comes once no process has seen the backlog for two
		// intervals.
		require.Eventually(t, func() bool {
			require.NoError(t, a1.Check(ctx))
			require.NoError(t, a2.Check(ctx))
			_, accepted = hook.got()
			return len(accepted) == 2
		}, 20*time.Second, 20*time.Millisecond)
		for range 3 {
			require.NoError(t, a2.Check(ctx))
			require.NoError(t, a1.Check(ctx))
		}
		_, accepted = hook.got()
		require.Len(t, accepted, 2, "one recovery, and nothing more")
		assert.Equal(t, "backlog", accepted[1]["condition"])
		assert.Equal(t, "resolved", accepted[1]["state"])
		assert.NotEmpty(t, accepted[1]["since"])
	})
}

func TestConditionsAndSlackPayload(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *sql.DB) {
		ctx := context.Background()
		var mu sync.Mutex
		var texts []string
		hook := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			var m map[string]string
			require.NoError(t, json.NewDecoder(r.Body).Decode(&m))
			mu.Lock()
			texts = append(texts, m["text"])
			mu.Unlock()
		}))
		defer hook.Close()
		q := newQueue(t, db)
		a := newAlerter(t, db, q, Thresholds{FailureRate: 0.5, MinAttempts: 4, Restarts: 2},
			Options{WebhookURL: hook.URL, Slack: true, Worker: "w1"})
		err := a.Lane(q, Thresholds{})
		assert.EqualError(t, err, "alert: lane transactional added twice")
		err = a.Lane(q, Thresholds{FailureRate: 5})
		assert.EqualError(t, err, "alert: lane transactional: failure rate threshold 5 is not a fraction between 0 and 1")

		// Failure rate: 3 of 3 failed is below the minimum of 4 attempts.
		enqueue(t, q, db, 5)
		now := time.Now().UnixMilli()
		_, err = db.Exec(`UPDATE mail_queue SET status = ?, next_run = ? WHERE id <= 3`, queue.StatusFailed, now)
		require.NoError(t, err)
		require.NoError(t, a.Check(ctx))
		assert.Empty(t, texts)
		_, err = db.Exec(`UPDATE mail_queue SET status = ?, next_run = ? WHERE id = 4`, queue.StatusSent, now)
		require.NoError(t, err)
		require.NoError(t, a.Check(ctx))
		require.Len(t, texts, 1)
		assert.Equal(t, "[mailspool] FIRING lane transactional failure_rate: failure rate 75.0% in the last hour, 3 of 4 (threshold 50.0%)", texts[0])

		// Stuck rows, an operator's pause, and two processes that died.
		_, err = db.Exec(`UPDATE mail_queue SET status = ?, next_run = ? WHERE id = 5`, queue.StatusSending, now-int64(10*time.Minute/time.Millisecond))
		require.NoError(t, err)
		require.NoError(t, q.Pause(ctx, "provider maintenance"))
		for _, w := range []string{"dead1", "dead2"} {
			_, err = db.Exec(`INSERT INTO mailspool_runs (lane, worker, started_at, seen_at, clean) VALUES ('transactional', ?, ?, ?, 0)`, w, now-60000, now-50000)
			require.NoError(t, err)
		}
		_, err = db.Exec(`INSERT INTO mailspool_runs (lane, worker, started_at, seen_at, clean) VALUES ('transactional', 'recycled', ?, ?, 1)`, now-60000, now-50000)
		require.NoError(t, err)
		require.NoError(t, a.Check(ctx))
		require.Len(t, texts, 4)
		assert.Contains(t, texts, "[mailspool] FIRING lane transactional stuck: 1 rows stuck in sending past their lease")
		assert.Contains(t, strings.Join(texts, "\n"), "[mailspool] FIRING lane transactional paused: paused by an operator since ")
		assert.Contains(t, strings.Join(texts, "\n"), "(provider maintenance)")
		assert.Contains(t, texts, "[mailspool] FIRING lane transactional restarting: 2 worker processes ended without a clean exit in the last hour (threshold 2)")

		// A process's own run counts only once it ended without Close.
		require.NoError(t, a.started(ctx))
		require.NoError(t, a.Close(ctx))
		n, err := a.restarts(ctx, "transactional", time.Now().Add(time.Hour/2))
		require.NoError(t, err)
		assert.Equal(t, 2, n, "a clean exit is no restart")
	})
}

func TestWebhookSecretNeverLogged(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *sql.DB) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		ln.Close() // nothing listens there now
		var logs lockedLog
		q := newQueue(t, db)
		a := newAlerter(t, db, q, Thresholds{}, Options{
			WebhookURL: "http://" + addr + "/services/T0K3N/SECRETPART", Worker: "w1",
			Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			// Run checks once: the cancel below finds it waiting, not in a
			// check it would leave half done.
			Interval: time.Hour,
		})
		require.NoError(t, q.Pause(context.Background(), ""))
		err = a.Check(context.Background())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "alert: lane transactional: paused firing: alert: posting to the webhook")
		// Run logs the same failure once its check has failed: wait for
		// that, however long a loaded machine takes to get there.
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan struct{})
		go func() { defer close(ran); a.Run(ctx) }()
		assert.Eventually(t, func() bool { return strings.Contains(logs.String(), "alert check failed") }, 20*time.Second, 10*time.Millisecond)
		cancel()
		<-ran
		for _, s := range []string{err.Error(), logs.String()} {
			assert.NotContains(t, s, "T0K3N")
			assert.NotContains(t, s, "SECRETPART")
		}
		var lease int64
		require.NoError(t, db.QueryRow(`SELECT lease_until FROM mailspool_alerts WHERE cond = 'paused'`).Scan(&lease))
		assert.Zero(t, lease, "a failed post is tried again at the next check")

		_, err = New(db, Options{WebhookURL: "ftp://x/T0K3N"})
		assert.EqualError(t, err, "alert: the webhook URL must be an http:// or https:// URL")
	})
}

// lockedLog is a log a goroutine may write while the test reads it.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// sendFunc is a transport whose every Send returns err.
type sendFunc func() error

func (f sendFunc) Send(context.Context, *transport.Message) (transport.Receipt, error) {
	return transport.Receipt{}, f()
}

func (f sendFunc) Close() error { return nil }

// A failure of sender scope is retried, not dropped, and raises the
// lane's "sender" alert; a recipient's permanent failure does not.
func TestSenderScopeRaisesTheLanesAlert(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *sql.DB) {
		ctx := context.Background()
		hook := newWebhook(t, 0)
		q := newQueue(t, db)
		a := newAlerter(t, db, q, Thresholds{}, Options{WebhookURL: hook.URL, Worker: "w1"})
		run := func(reply string) {
			t.Helper()
			enqueue(t, q, db, 1)
			w, err := queue.NewWorker(q, sendFunc(func() error { return classify.SMTPReply(reply) }),
				&queue.WorkerOptions{MaxMessages: 1, PollInterval: 10 * time.Millisecond, CleanupInterval: -1,
					Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			require.NoError(t, err)
			require.NoError(t, w.Run(ctx))
		}

		run("550 5.1.1 <ann@example.com>: Recipient address rejected: User unknown")
		require.NoError(t, a.Check(ctx))
		_, accepted := hook.got()
		assert.Empty(t, accepted, "one recipient's bounce is no alert")

		run("554 5.7.1 Service unavailable; Client host [192.0.2.1] blocked using zen.spamhaus.org")
		row, err := q.Row(ctx, 2)
		require.NoError(t, err)
		assert.Equal(t, "retry", row.Status, "a 5xx about our sender's IP is retried")
		assert.Equal(t, "sender", row.LastScope)
		require.NoError(t, a.Check(ctx))
		_, accepted = hook.got()
		require.Len(t, accepted, 1)
		assert.Equal(t, "sender", accepted[0]["condition"])
		assert.Equal(t, "firing", accepted[0]["state"])
		assert.Equal(t, 1.0, accepted[0]["value"])
	})
}

// A lane whose transport is a composite alerts while a member is down
// (a 535 on it, say), whatever happens to its mail meanwhile.
func TestMemberDownAlerts(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *sql.DB) {
		ctx := context.Background()
		require.NoError(t, composite.Migrate(ctx, db))
		hook := newWebhook(t, 0)
		q := newQueue(t, db)
		a := newAlerter(t, db, q, Thresholds{Members: true}, Options{WebhookURL: hook.URL, Worker: "w1"})
		require.NoError(t, a.Check(ctx))
		_, accepted := hook.got()
		assert.Empty(t, accepted, "every member up: no alert")

		h, err := composite.NewSQL(db)
		require.NoError(t, err)
		now := time.Now()
		down, err := h.MarkDown(ctx, "transactional", "smtp://a.example:587", "via smtp://a.example:587: connection: 535 5.7.8 Authentication credentials invalid", now, now.Add(time.Minute))
		require.NoError(t, err)
		require.True(t, down)
		require.NoError(t, a.Check(ctx))
		_, accepted = hook.got()
		require.Len(t, accepted, 1)
		assert.Equal(t, "member_down", accepted[0]["condition"])
		assert.Equal(t, "firing", accepted[0]["state"])
		assert.Contains(t, fmt.Sprint(accepted[0]), "smtp://a.example:587 down since")
		assert.Contains(t, fmt.Sprint(accepted[0]), "535 5.7.8")
	})
}

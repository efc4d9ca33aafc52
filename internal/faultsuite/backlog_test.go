package faultsuite

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestDeferredBacklog puts 100 000 rows in retry, due in an hour, beside an
// idle worker, then enqueues fresh mails one at a time: each must be sent
// within one poll interval (plus a second for the send itself), because a
// claim reads the pending range first and never walks the deferred rows.
func TestDeferredBacklog(t *testing.T) {
	scenario(t)
	for _, st := range []struct {
		name string
		open func(*testing.T) store
		bulk string // INSERT of the deferred rows; ? is the time they are due
	}{
		{"mariadb", newMariaDB, `INSERT INTO ` + table + ` (status, attempts, next_run, created_at, message_id, from_addr, to_addr, subject, text_body, html_body, headers, last_kind, last_error)
  SELECT 3, 1, ?, ?, CONCAT('deferred-', seq, '@faults.test'), 'noreply@shop.example', CONCAT('d', seq, '@example.com'), 'deferred', 'text', '', '[]', 'temporary', '421 4.7.0 try again later'
  FROM seq_1_to_100000`},
		{"sqlite", newSQLite, `WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < 100000)
  INSERT INTO ` + table + ` (status, attempts, next_run, created_at, message_id, from_addr, to_addr, subject, text_body, html_body, headers, last_kind, last_error)
  SELECT 3, 1, ?, ?, 'deferred-' || n || '@faults.test', 'noreply@shop.example', 'd' || n || '@example.com', 'deferred', 'text', '', '[]', 'temporary', '421 4.7.0 try again later'
  FROM seq`},
		{"postgres", newPostgres, `INSERT INTO ` + table + ` (status, attempts, next_run, created_at, message_id, from_addr, to_addr, subject, text_body, html_body, headers, last_kind, last_error)
  SELECT 3, 1, ?, ?, 'deferred-' || n || '@faults.test', 'noreply@shop.example', 'd' || n || '@example.com', 'deferred', 'text', '', '[]', 'temporary', '421 4.7.0 try again later'
  FROM generate_series(1, 100000) AS n`},
	} {
		t.Run(st.name, func(t *testing.T) {
			const poll, fresh = 2 * time.Second, 3
			s := st.open(t)
			p := startProvider(t)
			now := time.Now()
			began := time.Now()
			if _, err := s.db.Exec(s.sql(st.bulk), now.Add(time.Hour).UnixMilli(), now.UnixMilli()); err != nil {
				t.Fatalf("inserting the deferred rows: %v", err)
			}
			bulk := time.Since(began)
			cfg := writeConfig(t, s, p.url(), fmt.Sprintf("poll_interval = %q", poll))
			w := startWorker(t, "worker", cfg, false)
			dumpLogs(t, w)
			// Let the worker start and settle into its idle polling.
			time.Sleep(poll + poll/2)

			q := newQueue(t, s)
			var worst time.Duration
			for i := range fresh {
				before := p.count()
				enqueued := time.Now()
				if _, err := q.Enqueue(context.Background(), s.db, message(fmt.Sprintf("fresh-%d@example.com", i))); err != nil {
					t.Fatal(err)
				}
				waitProgress(t, "the fresh mail", 30*time.Second, func() int64 { return 0 }, func() bool { return p.count() > before })
				worst = max(worst, time.Since(enqueued))
				// The next mail lands at another point of the poll cycle.
				time.Sleep(poll / 3)
			}
			f := tallyWhere(t, s, p, "message_id NOT LIKE 'deferred-%'")
			stillDeferred := countWhere(t, s, "status = ?", retry)
			report(t, f, "deferred_rows", stillDeferred, "bulk_insert", bulk, "poll_interval", poll, "worst_fresh_latency", worst)
			checkFinal(t, f)
			// The wait after an empty claim is the poll interval ±25 %.
			if worst > poll*5/4+time.Second {
				t.Errorf("a fresh mail took %s to be sent behind 100 000 deferred rows; want within one poll interval (%s, +25 %% jitter) plus 1s", worst, poll)
			}
			if stillDeferred != 100000 {
				t.Errorf("%d rows still in retry, want 100000: deferred mail was touched before it was due", stillDeferred)
			}
		})
	}
}

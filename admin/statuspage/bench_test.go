package statuspage_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/mailspool/mailspool/admin/statuspage"
	"github.com/mailspool/mailspool/queue"
	"github.com/stretchr/testify/require"
)

// historyRows is the size of the history the benchmark pages read.
const historyRows = 1_000_000

// seedHistory fills lane "transactional" with historyRows mails finished
// over 30 days (about 97 % sent, 3 % failed under four rules), and a
// backlog of 2 000 pending and 500 retry mails, in a few statements.
func seedHistory(b *testing.B, db *sql.DB, mysql bool) *queue.Queue {
	b.Helper()
	ctx := context.Background()
	q, err := queue.New(ctx, db, queue.Lane{Name: "transactional"}, nil)
	require.NoError(b, err)
	now := time.Now().UnixMilli()
	span := int64(30 * 24 * time.Hour / time.Millisecond)
	// n counts from 1; a row's next_run falls evenly over the 30 days.
	cols := `status, attempts, next_run, created_at, message_id, from_addr, to_addr, subject, text_body, html_body, headers, last_kind, last_code, last_rule, last_error`
	sel := fmt.Sprintf(`SELECT
  CASE WHEN n %% 100 < 3 THEN 4 ELSE 2 END,
  1,
  %[1]d - (n * %[2]d / %[3]d),
  %[1]d - (n * %[2]d / %[3]d) - 1000,
  CONCAT('m', n, '@shop.example'), 'noreply@shop.example', CONCAT('user', n, '@example.com'), 'Welcome', 'hello', '', '[]',
  CASE WHEN n %% 100 < 3 THEN 'permanent' ELSE 'sent' END,
  CASE WHEN n %% 100 < 3 THEN 550 ELSE 250 END,
  CASE n %% 100 WHEN 0 THEN 'smtp-5.1.1' WHEN 1 THEN 'smtp-5.7.1' WHEN 2 THEN 'operator:acme' ELSE '' END,
  CASE WHEN n %% 100 < 3 THEN '550 5.1.1 no such user' ELSE '' END`, now, span, historyRows)
	stmt := `INSERT INTO mail_queue (` + cols + `) WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < ` + fmt.Sprint(historyRows) + `) ` + sel + ` FROM s`
	if mysql {
		stmt = `INSERT INTO mail_queue (` + cols + `) ` + sel + ` FROM (SELECT seq AS n FROM seq_1_to_` + fmt.Sprint(historyRows) + `) s`
	}
	start := time.Now()
	_, err = db.ExecContext(ctx, stmt)
	require.NoError(b, err)
	for _, backlog := range []struct {
		status, n int
		kind      string
	}{{queue.StatusPending, 2000, ""}, {queue.StatusRetry, 500, "temporary"}} {
		_, err = db.ExecContext(ctx, `INSERT INTO mail_queue (`+cols+`) SELECT ?, 0, next_run + 3600000, created_at, CONCAT(message_id, 'b'), from_addr, to_addr, subject, text_body, html_body, headers, ?, 0, '', ''
  FROM mail_queue WHERE id <= ?`, backlog.status, backlog.kind, backlog.n)
		require.NoError(b, err)
	}
	if mysql {
		_, err = db.ExecContext(ctx, `ANALYZE TABLE mail_queue`)
	} else {
		_, err = db.ExecContext(ctx, `ANALYZE`)
	}
	require.NoError(b, err)
	b.Logf("seeded %d rows of history and 2 500 in the backlog in %v", historyRows, time.Since(start).Round(time.Second))
	return q
}

// BenchmarkPages1M measures the pages on 1 000 000 rows of history and
// reports each one's p50 and p95 in ms: the overview under a steady load
// whose figures are read again 20 times a second, and every page with
// nothing cached (the first request after a quiet spell). Run it with
//
//	go test -run '^$' -bench Pages1M -benchtime 400x ./admin/statuspage/
//
// (MAILSPOOL_BENCH_STORE=sqlite or mariadb for one store).
func BenchmarkPages1M(b *testing.B) {
	stores := map[string]func() (*sql.DB, bool){
		"sqlite":  func() (*sql.DB, bool) { return sqliteDB(b), false },
		"mariadb": func() (*sql.DB, bool) { return mariaDB(b), true },
	}
	for _, name := range []string{"sqlite", "mariadb"} {
		if only := os.Getenv("MAILSPOOL_BENCH_STORE"); only != "" && only != name {
			continue
		}
		b.Run(name, func(b *testing.B) {
			db, mysql := stores[name]()
			q := seedHistory(b, db, mysql)
			var failed int64
			require.NoError(b, db.QueryRow(`SELECT MAX(id) FROM mail_queue WHERE status = 4`).Scan(&failed))
			for _, c := range []struct {
				name     string
				path     string
				cacheFor time.Duration
				gap      time.Duration // between requests, not counted
			}{
				// A steady load: the figures are read again 20 times a second
				// (CacheFor 5s reads them once per 5 s), in the background.
				{"overview-steady", "/", 50 * time.Millisecond, 5 * time.Millisecond},
				// Cold: every request reads every figure, as the first one
				// after a quiet spell does.
				{"overview-cold", "/", time.Nanosecond, 0},
				{"failures-cold", "/failures", time.Nanosecond, 0},
				{"rule", "/lanes/transactional/failures?rule=smtp-5.1.1&kind=permanent", time.Nanosecond, 0},
				{"mail", fmt.Sprintf("/lanes/transactional/mail/%d", failed), time.Nanosecond, 0},
			} {
				b.Run(c.name, func(b *testing.B) {
					p, err := statuspage.New([]*queue.Queue{q}, &statuspage.Options{CacheFor: c.cacheFor})
					require.NoError(b, err)
					var took []time.Duration
					for b.Loop() {
						time.Sleep(c.gap)
						start := time.Now()
						w := httptest.NewRecorder()
						p.ServeHTTP(w, httptest.NewRequest(http.MethodGet, c.path, nil))
						took = append(took, time.Since(start))
						if w.Code != http.StatusOK {
							b.Fatalf("%s: %d %s", c.path, w.Code, w.Body)
						}
					}
					slices.Sort(took)
					ms := func(q float64) float64 {
						return float64(took[min(len(took)-1, int(q*float64(len(took))))]) / float64(time.Millisecond)
					}
					b.ReportMetric(ms(0.50), "p50-ms")
					b.ReportMetric(ms(0.95), "p95-ms")
					b.ReportMetric(0, "ns/op")
				})
			}
		})
	}
}

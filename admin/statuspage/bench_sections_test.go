package statuspage_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mailspool/mailspool/admin/statuspage"
	"github.com/mailspool/mailspool/internal/placeholder"
	"github.com/mailspool/mailspool/queue"
	"github.com/stretchr/testify/require"
)

// sectionRows is the size of the suppression list and of the events table
// in BenchmarkDeliverabilitySections.
const sectionRows = 100_000

// BenchmarkDeliverabilitySections measures what the suppressions-by-reason
// and last-provider-event sections add to the overview when nothing is
// cached (every figure read by the request), with 100 000 suppressions and
// 100 000 provider events: the cold overview without them and with them
// take turns, request by request, and each reports its p50 and p95 in ms.
//
//	go test -run '^$' -bench DeliverabilitySections -benchtime 200x ./admin/statuspage/
//
// (MAILSPOOL_BENCH_STORE=sqlite or mariadb for one store).
func BenchmarkDeliverabilitySections(b *testing.B) {
	stores := map[string]func() *sql.DB{"sqlite": func() *sql.DB { return sqliteDB(b) }, "mariadb": func() *sql.DB { return mariaDB(b) }}
	for _, name := range []string{"sqlite", "mariadb"} {
		if only := os.Getenv("MAILSPOOL_BENCH_STORE"); only != "" && only != name {
			continue
		}
		b.Run(name, func(b *testing.B) {
			db := stores[name]()
			s := seed(b, db)
			o := seedDeliverability(b, db, s)
			now := time.Now().UnixMilli()
			reasons := []string{"hard_bounce", "complaint", "unsubscribe", "manual", "invalid"}
			types := []string{"delivered", "bounced", "complained", "deferred"}
			for i := 0; i < sectionRows; i += 500 {
				var sup, ev strings.Builder
				var sa, ea []any
				for j := i; j < min(i+500, sectionRows); j++ {
					if j > i {
						sup.WriteString(", ")
						ev.WriteString(", ")
					}
					sup.WriteString("(?, 'all', ?, 'bench', ?)")
					sa = append(sa, fmt.Sprintf("gone%d@example.com", j), reasons[j%len(reasons)], now-int64(j))
					ev.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
					lane := ""
					if j%2 == 0 {
						lane = "transactional"
					}
					ea = append(ea, "sendgrid", fmt.Sprintf("bench-%d", j), types[j%len(types)], fmt.Sprintf("r%d@example.com", j), now-int64(j), now-int64(j), lane, j)
				}
				_, err := db.Exec(placeholder.For(db, `INSERT INTO mailspool_suppressions (address, scope, reason, source, created_at) VALUES `+sup.String()), sa...)
				require.NoError(b, err)
				_, err = db.Exec(placeholder.For(db, `INSERT INTO mailspool_events (provider, event_id, type, recipient, occurred_at, received_at, lane, mail_id) VALUES `+ev.String()), ea...)
				require.NoError(b, err)
			}
			plain, err := statuspage.New([]*queue.Queue{s.q}, &statuspage.Options{CacheFor: time.Nanosecond})
			require.NoError(b, err)
			oc := *o
			oc.CacheFor = time.Nanosecond
			with, err := statuspage.New([]*queue.Queue{s.q}, &oc)
			require.NoError(b, err)
			var tookPlain, tookWith []time.Duration
			serve := func(p *statuspage.Page) time.Duration {
				start := time.Now()
				w := httptest.NewRecorder()
				p.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(context.Background()))
				took := time.Since(start)
				if w.Code != http.StatusOK || strings.Contains(w.Body.String(), "reading these figures failed") {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
				return took
			}
			for b.Loop() {
				tookPlain = append(tookPlain, serve(plain))
				tookWith = append(tookWith, serve(with))
			}
			for _, t := range []struct {
				name string
				took []time.Duration
			}{{"without", tookPlain}, {"with", tookWith}} {
				slices.Sort(t.took)
				ms := func(q float64) float64 {
					return float64(t.took[min(len(t.took)-1, int(q*float64(len(t.took))))]) / float64(time.Millisecond)
				}
				b.ReportMetric(ms(0.50), "p50-ms-"+t.name)
				b.ReportMetric(ms(0.95), "p95-ms-"+t.name)
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

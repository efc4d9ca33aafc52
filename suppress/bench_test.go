package suppress

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/require"
)

// benchListSize is the suppression list's size in BenchmarkClaimScreen.
const benchListSize = 100_000

// BenchmarkClaimScreen measures what checking the suppression list inside
// each claim costs: one worker (batch 100, concurrency 8, a no-op send)
// drains b.N mails from a lane without a list ("off") and from a lane whose
// every claim looks its recipients up in a list of 100 000 entries, none
// of them the recipients' ("screen"). The two take turns in three rounds,
// so both see the same load; it reports each one's mails/s, the screened
// drain as a percentage of the bare one (%off, higher is better), and the
// lookup alone: the statement a claim of 100 rows adds (µs/lookup100).
//
//	go test -run '^$' -bench ClaimScreen -benchtime 3000x ./suppress
//
// (MAILSPOOL_BENCH_STORE=sqlite, mariadb or postgres for one store). The
// list's table is analyzed after it is filled, as a server's automatic
// statistics would be by the time a list grew that long: with the
// statistics of an empty table, PostgreSQL plans the lookup as a scan.
func BenchmarkClaimScreen(b *testing.B) {
	for _, name := range []string{"sqlite", "mariadb", "postgres"} {
		if only := os.Getenv("MAILSPOOL_BENCH_STORE"); only != "" && only != name {
			continue
		}
		b.Run(name, func(b *testing.B) {
			var s store
			switch name {
			case "sqlite":
				s = newSQLite(b)
			case "mariadb":
				s = newMariaDB(b)
			default:
				s = newPostgres(b)
			}
			ctx := context.Background()
			require.NoError(b, queue.Migrate(ctx, s.db, "bench_off", "bench_screen"))
			l, err := Open(s.db)
			require.NoError(b, err)
			emptyList := lookupTime(b, s, l)
			fillList(b, s, benchListSize)
			analyze := map[string]string{"sqlite": `ANALYZE`, "mariadb": `ANALYZE TABLE ` + Table, "postgres": `ANALYZE ` + Table}[name]
			_, err = s.db.Exec(analyze)
			require.NoError(b, err)
			fullList := lookupTime(b, s, l)

			lanes := map[string]*queue.Queue{}
			for _, v := range []string{"off", "screen"} {
				lane := queue.Lane{Name: v, Table: "bench_" + v, RecipientLimit: queue.NoLimit}
				if v == "screen" {
					lane.Screen = l.Screen(v, Policy{})
				}
				q, err := queue.New(ctx, s.db, lane, nil)
				require.NoError(b, err)
				lanes[v] = q
			}
			tr := &scripted{} // accepts everything
			took := map[string]time.Duration{}
			b.ResetTimer()
			for round := range 3 {
				for _, v := range []string{"off", "screen"} {
					b.StopTimer()
					enqueueBench(b, s.db, lanes[v], fmt.Sprintf("r%d", round), b.N)
					b.StartTimer()
					took[v] += drainBench(b, lanes[v], tr, b.N)
				}
			}
			b.StopTimer()
			off := float64(3*b.N) / took["off"].Seconds()
			scr := float64(3*b.N) / took["screen"].Seconds()
			b.ReportMetric(off, "mails/s-off")
			b.ReportMetric(scr, "mails/s-screen")
			b.ReportMetric(100*scr/off, "%off")
			b.ReportMetric(float64(fullList.Microseconds()), "µs/lookup100")
			b.ReportMetric(float64(emptyList.Microseconds()), "µs/lookup100-empty")
		})
	}
}

// lookupTime is the median time of the lookup a claim of 100 rows adds
// (100 addresses, none on the list), in a transaction of its own.
func lookupTime(b *testing.B, s store, l *List) time.Duration {
	b.Helper()
	ctx := context.Background()
	addrs := make([]string, 100)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("fresh%d@example.org", i)
	}
	var took []time.Duration
	for range 101 {
		tx, err := s.db.BeginTx(ctx, nil)
		require.NoError(b, err)
		start := time.Now()
		found, err := l.Lookup(ctx, tx, "screen", addrs)
		took = append(took, time.Since(start))
		require.NoError(b, err)
		require.Empty(b, found)
		require.NoError(b, tx.Rollback())
	}
	slices.Sort(took)
	return took[len(took)/2]
}

// fillList writes n entries straight into the table, 500 a statement.
func fillList(b *testing.B, s store, n int) {
	b.Helper()
	d, err := dialectOf(s.db)
	require.NoError(b, err)
	now := time.Now().UnixMilli()
	for i := 0; i < n; i += 500 {
		var sb strings.Builder
		var args []any
		sb.WriteString(`INSERT INTO ` + Table + ` (address, scope, reason, source, created_at) VALUES `)
		for j := i; j < min(i+500, n); j++ {
			if j > i {
				sb.WriteString(", ")
			}
			sb.WriteString("(?, 'all', 'hard_bounce', 'bench', ?)")
			args = append(args, fmt.Sprintf("gone%d@example.com", j), now)
		}
		_, err := s.db.Exec(d.Rebind(sb.String()), args...)
		require.NoError(b, err)
	}
}

// enqueueBench enqueues n mails to distinct recipients, 500 a transaction.
func enqueueBench(b *testing.B, db *sql.DB, q *queue.Queue, tag string, n int) {
	b.Helper()
	ctx := context.Background()
	for i := 0; i < n; {
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(b, err)
		for j := 0; j < 500 && i < n; j, i = j+1, i+1 {
			_, err := q.Enqueue(ctx, tx, mailTo(fmt.Sprintf("u%s-%d@example.net", tag, i)))
			require.NoError(b, err)
		}
		require.NoError(b, tx.Commit())
	}
}

// drainBench runs one worker on q until it has sent n mails, and returns
// how long that took.
func drainBench(b *testing.B, q *queue.Queue, tr transport.Transport, n int) time.Duration {
	b.Helper()
	w, err := queue.NewWorker(q, tr, &queue.WorkerOptions{Batch: 100, Concurrency: 8, PollInterval: time.Millisecond, CleanupInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(b, err)
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	for w.Stats().Sent < int64(n) { // progress: every mail is sent
		time.Sleep(time.Millisecond)
	}
	took := time.Since(start)
	cancel()
	require.NoError(b, <-done)
	return took
}

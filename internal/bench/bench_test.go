package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/queue/dburl/dburltest"
	"github.com/stretchr/testify/require"
)

// TestMain lets the test binary be the worker process of a --processes run.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ChildCommand {
		if err := RunChild(context.Background(), os.Args[2:], os.Stdin, os.Stdout, os.Stderr); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func stores(t *testing.T) map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"sqlite":  func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "bench.db") },
		"mariadb": func(t *testing.T) string { return dburltest.MariaDB.Fresh(t) },
	}
}

// TestRunDeliversEveryMailOnce runs the whole benchmark, both algorithms,
// with worker goroutines and with worker processes, and checks the counts
// it reports against the database.
func TestRunDeliversEveryMailOnce(t *testing.T) {
	for name, newDB := range stores(t) {
		t.Run(name, func(t *testing.T) {
			for _, processes := range []bool{false, true} {
				url := newDB(t)
				var progress lockedBuffer
				opts := Options{DB: url, Workers: 3, Producers: 2, Messages: 300, History: 500, Progress: &progress,
					Processes: processes, Algorithm: Both, PollInterval: 20 * time.Millisecond, Executable: os.Args[0], Stall: 20 * time.Second,
					Table: "kept", Keep: true}
				results, err := Run(context.Background(), opts)
				require.NoError(t, err, "progress and worker logs:\n%s", progress.String())
				require.Len(t, results, 2)
				classic, ours := results[0], results[1]
				require.Equal(t, Classic, classic.Algorithm)
				require.Equal(t, 0, classic.Lost, "the classic claim delivers everything eventually at this size")
				require.NoError(t, ours.Err())
				require.Equal(t, 300, ours.Delivered)
				require.Equal(t, 500, ours.History)
				require.Positive(t, ours.DrainPerS)
				require.Positive(t, ours.EnqueuePerS)
				require.Positive(t, ours.P50ClaimMS, "claim transactions were timed")
				require.Positive(t, ours.RSSMB)
				require.Equal(t, processes, ours.Processes)
				require.Contains(t, ours.Line(), "bench store=")
				if name == "mariadb" {
					// The server's own counters: every drain writes redo
					// and reads pages.
					for _, r := range results {
						require.Positive(t, r.RedoPerMailKB, r.Algorithm)
						require.Positive(t, r.PagesPerMail, r.Algorithm)
					}
					require.Contains(t, ours.Line(), " pages_per_mail=")
					require.Contains(t, ours.Line(), " disk_reads_per_mail=")
				}

				db, err := dburl.Open(url)
				require.NoError(t, err)
				var sent, history int
				require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM kept WHERE template = ? AND status = 2`, benchTemplate).Scan(&sent))
				require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM kept WHERE template = ?`, historyTemplate).Scan(&history))
				db.Close()
				require.Equal(t, 300, sent)
				require.Equal(t, 500, history)
			}
		})
	}
}

// TestRunThroughSMTP counts deliveries at an SMTP server: the adapter's
// connections are reused across a batch.
func TestRunThroughSMTP(t *testing.T) {
	url := "sqlite:" + filepath.Join(t.TempDir(), "bench.db")
	results, err := Run(context.Background(), Options{DB: url, Workers: 2, Messages: 200, SMTP: true, PollInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	r := results[0]
	require.NoError(t, r.Err())
	require.Equal(t, "smtp", r.Transport)
	require.Equal(t, 200, r.Delivered)
	require.Positive(t, r.SMTPConnections)
	require.LessOrEqual(t, r.SMTPConnections, 2*4, "at most pool (4) connections per worker: reused, not one per mail")
}

// TestRunThroughSMTPWithARoundTrip: --latency with --smtp puts the SMTP
// server a round trip away. One worker's pool of 4 connections, each mail
// at least two round trips (the envelope, then the message), cannot drain
// faster than 4 / (2 × 10 ms) = 200 mails/s, however fast the machine.
func TestRunThroughSMTPWithARoundTrip(t *testing.T) {
	url := "sqlite:" + filepath.Join(t.TempDir(), "bench.db")
	results, err := Run(context.Background(), Options{DB: url, Workers: 1, Messages: 100, SMTP: true, Latency: 10 * time.Millisecond, PollInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	r := results[0]
	require.NoError(t, r.Err())
	require.Equal(t, 100, r.Delivered)
	require.Equal(t, "10ms", r.Latency)
	require.LessOrEqual(t, r.DrainPerS, 200.0, "drain rate: the round trip was not applied")
}

// TestSteadyRunReportsEndToEndTimes: with Steady the workers drain while
// the producers enqueue, and the result gives each mail's time from commit
// to send.
func TestSteadyRunReportsEndToEndTimes(t *testing.T) {
	for name, newDB := range stores(t) {
		t.Run(name, func(t *testing.T) {
			var progress lockedBuffer
			results, err := Run(context.Background(), Options{DB: newDB(t), Workers: 2, Producers: 2, Messages: 300, Steady: true,
				PollInterval: 20 * time.Millisecond, Progress: &progress, Stall: 20 * time.Second})
			require.NoError(t, err, "progress and worker logs:\n%s", progress.String())
			r := results[0]
			require.NoError(t, r.Err())
			require.Equal(t, 300, r.Delivered)
			require.True(t, r.Steady)
			require.Positive(t, r.E2EP50MS)
			require.GreaterOrEqual(t, r.E2EP99MS, r.E2EP50MS)
			require.Contains(t, r.Line(), " steady=true e2e_p50_ms=")
		})
	}
}

// TestEndToEndTimes: a mail's time runs from its commit to its first
// delivery, at the time the delivery was made (a worker process reports
// its deliveries late and out of order); a delivery made before its
// producer read the clock counts as 0, and a mail not delivered does not
// count.
func TestEndToEndTimes(t *testing.T) {
	tr := newTracker([]string{"a", "b", "c", "d"})
	t0 := time.Now()
	tr.committed[0] = t0
	tr.committed[1] = t0.Add(time.Hour) // delivered before its commit was timed
	tr.committed[2] = t0
	tr.committed[3] = t0
	tr.deliverAt("a", t0.Add(30*time.Millisecond))
	tr.deliverAt("d", t0.Add(50*time.Millisecond))
	tr.deliverAt("b", t0.Add(20*time.Millisecond))
	tr.deliverAt("a", t0.Add(90*time.Millisecond)) // a duplicate
	require.Equal(t, []time.Duration{30 * time.Millisecond, 0, 50 * time.Millisecond}, tr.endToEnd())
	require.Equal(t, t0.Add(50*time.Millisecond), tr.lastNew, "the last first delivery, not the last reported")
}

// TestStallCountsFromTheDrainsStart: the tracker exists during the
// enqueue, when nothing can be delivered yet; a drain that starts after
// a long enqueue is not taken for a stalled one at its first progress
// tick.
func TestStallCountsFromTheDrainsStart(t *testing.T) {
	tr := newTracker([]string{"a"})
	tr.last = time.Now().Add(-time.Hour) // an hour of enqueue
	go func() {
		time.Sleep(1500 * time.Millisecond)
		tr.deliver("a")
	}()
	var progress strings.Builder
	tr.wait(context.Background(), 5*time.Second, &progress, "test")
	require.NotContains(t, progress.String(), "giving up")
	distinct, _, _, _ := tr.counts()
	require.Equal(t, 1, distinct)
}

// TestSteadyRunStopsTheProducersWhenTheDrainFails: in a steady run the
// workers fail at once (a batch out of range); the producers stop too
// instead of enqueueing every mail first.
func TestSteadyRunStopsTheProducersWhenTheDrainFails(t *testing.T) {
	url := "sqlite:" + filepath.Join(t.TempDir(), "bench.db")
	_, err := Run(context.Background(), Options{DB: url, Workers: 1, Producers: 1, Messages: 20000, Steady: true, Batch: 100000, Table: "steady", Keep: true})
	require.ErrorContains(t, err, "batch 100000 out of range")
	require.NotContains(t, err.Error(), "context canceled", "the producers' stop is not a second error")
	db, err := dburl.Open(url)
	require.NoError(t, err)
	defer db.Close()
	var n int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM steady`).Scan(&n))
	require.Less(t, n, 20000, "the producers stopped early")
}

// TestReuseHistory keeps the history of an earlier run and drops its mail.
func TestReuseHistory(t *testing.T) {
	url := "sqlite:" + filepath.Join(t.TempDir(), "bench.db")
	var progress strings.Builder
	opts := Options{DB: url, Workers: 1, Producers: 1, Messages: 50, History: 100, PollInterval: 20 * time.Millisecond, Progress: &progress,
		Table: "hist", Keep: true}
	for range 2 {
		results, err := Run(context.Background(), opts)
		require.NoError(t, err)
		require.NoError(t, results[0].Err())
	}
	require.Contains(t, progress.String(), "reusing the 100 history rows")
	db, err := dburl.Open(url)
	require.NoError(t, err)
	defer db.Close()
	var n int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM hist`).Scan(&n))
	require.Equal(t, 150, n, "100 history rows and this run's 50 mails")
}

// TestPriorities: the mix gives one mail in twenty the highest priority
// and leaves the rest at the default; the interleave gives each of the
// ten priorities to a tenth of the mails. The second run reuses the first
// one's history (on PostgreSQL, vacuumed).
func TestPriorities(t *testing.T) {
	for name, url := range map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "bench.db") },
		"postgres": func(t *testing.T) string { return dburltest.Postgres.Fresh(t) },
	} {
		t.Run(name, func(t *testing.T) {
			url := url(t)
			db, err := dburl.Open(url)
			require.NoError(t, err)
			defer db.Close()
			var progress strings.Builder
			for _, c := range []struct {
				mode string
				want map[int]int // priority: mails
			}{
				{PrioritiesMix, map[int]int{queue.MaxPriority: 10, queue.DefaultPriority: 190}},
				{PrioritiesInterleave, map[int]int{0: 20, 1: 20, 2: 20, 3: 20, 4: 20, 5: 20, 6: 20, 7: 20, 8: 20, 9: 20}},
			} {
				results, err := Run(context.Background(), Options{DB: url, Workers: 2, Producers: 2, Messages: 200, History: 40,
					Priorities: c.mode, PollInterval: 20 * time.Millisecond, Progress: &progress, Table: "prio", Keep: true})
				require.NoError(t, err, progress.String())
				require.NoError(t, results[0].Err())
				require.Equal(t, c.mode, results[0].Priorities)
				require.Contains(t, results[0].Line(), " priorities="+c.mode+" ")
				rows, err := db.Query(`SELECT ` + fmt.Sprint(queue.MaxPriority) + ` - nice, COUNT(*) FROM prio WHERE template <> '` + historyTemplate + `' GROUP BY nice`)
				require.NoError(t, err)
				got := map[int]int{}
				for rows.Next() {
					var p, n int
					require.NoError(t, rows.Scan(&p, &n))
					got[p] = n
				}
				require.NoError(t, rows.Err())
				require.Equal(t, c.want, got, c.mode)
			}
			require.Contains(t, progress.String(), "reusing the 40 history rows")
		})
	}
}

func TestFinishCountsDuplicatesAndLost(t *testing.T) {
	tr := newTracker([]string{"a", "b", "c"})
	start := time.Now()
	tr.deliver("a")
	tr.deliver("a")
	tr.deliver("b")
	tr.deliver("stranger")
	r := &Result{Messages: 3, Algorithm: Mailspool}
	finish(r, tr, start)
	require.Equal(t, 4, r.Delivered)
	require.Equal(t, 1, r.Duplicates)
	require.Equal(t, 1, r.Lost)
	require.ErrorContains(t, r.Err(), "1 lost, 1 duplicates")
}

// TestReadCountersReadsTheServersCounters checks that every counter the
// per-mail figures come from is found: a server that has started has
// written redo, asked its buffer pool for pages and read some from disk.
func TestReadCountersReadsTheServersCounters(t *testing.T) {
	db, err := dburl.Open(dburltest.MariaDB.Fresh(t))
	require.NoError(t, err)
	defer db.Close()
	c := readCounters(context.Background(), db)
	require.Positive(t, c.lsn)
	require.Positive(t, c.pageReads)
	require.Positive(t, c.diskReads)
	require.GreaterOrEqual(t, c.pageReads, c.diskReads, "a page read from disk was asked for first")
}

func TestIsDeadlock(t *testing.T) {
	require.True(t, isDeadlock(&mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock"}))
	require.False(t, isDeadlock(&mysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded"}))
	require.False(t, isDeadlock(nil))
}

func TestOptionsRefuseNonsense(t *testing.T) {
	for _, o := range []Options{
		{DB: "sqlite:x.db", Table: "1table"},
		{DB: "sqlite:x.db", Table: "mailspool_schema"},
		{DB: "sqlite:x.db", Table: "mailspool_lanes"},
		{DB: "sqlite:x.db", Table: "MailSpool_Alerts"},
		{DB: "sqlite:x.db", Table: "mail_queue", Protect: []string{"mail_queue"}},
		{DB: "sqlite:x.db", Table: "mail", Protect: []string{"mail_limits"}},
		{DB: "sqlite:x.db", Workers: -1},
		{DB: "sqlite:x.db", Algorithm: "fifo"},
		{DB: "sqlite:x.db", Algorithm: Both, SMTP: true},
		{DB: "sqlite:x.db", Algorithm: Classic, Steady: true},
		{DB: "sqlite:x.db", Steady: true, OnDrain: func() func() { return func() {} }},
		{DB: "sqlite:x.db", Latency: -time.Second},
		{DB: "sqlite:x.db", Priorities: "urgent"},
	} {
		_, err := Run(context.Background(), o)
		require.Error(t, err, "%+v", o)
		require.True(t, strings.HasPrefix(err.Error(), "bench: "), err.Error())
	}
}

// lockedBuffer is a strings.Builder that worker processes' log copiers may
// write to at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestSummarizeGivesMedianAndSpreadPerAlgorithm(t *testing.T) {
	var results []*Result
	for run, drains := range [][2]float64{{100, 1000}, {50, 1500}, {200, 800}, {100, 1200}} {
		results = append(results,
			&Result{Run: run + 1, Algorithm: Classic, DrainPerS: drains[0], Duplicates: 3, Deadlocks: 1},
			&Result{Run: run + 1, Algorithm: Mailspool, DrainPerS: drains[1], PagesPerMail: float64(30 + run), Store: "mysql"})
	}
	sums := Summarize(results)
	require.Len(t, sums, 2)
	c, m := sums[0], sums[1]
	require.Equal(t, Classic, c.Algorithm)
	require.Equal(t, 4, c.Runs)
	require.Equal(t, Spread{Median: 100, Min: 50, Max: 200}, c.DrainPerS)
	require.Equal(t, 12, c.Duplicates)
	require.Equal(t, 4, c.Deadlocks)
	require.Nil(t, c.VsClassic, "the classic run is not compared with itself")

	require.Equal(t, Mailspool, m.Algorithm)
	require.Equal(t, Spread{Median: 1100, Min: 800, Max: 1500}, m.DrainPerS, "an even count's median is the mean of the middle two")
	require.Equal(t, Spread{Median: 31.5, Min: 30, Max: 33}, m.PagesPerMail)
	// Drain over the classic drain of the same run: 10, 30, 4, 12.
	require.Equal(t, &Spread{Median: 11, Min: 4, Max: 30}, m.VsClassic)
	require.Zero(t, m.Duplicates)

	line := m.Line()
	for _, field := range []string{"bench-summary ", " runs=4", " drain_per_s_median=1100", " drain_per_s_min=800", " drain_per_s_max=1500",
		" pages_per_mail_median=31.5", " vs_classic_median=11.0", " duplicates=0", " lost=0"} {
		require.Contains(t, line, field)
	}
	require.NotContains(t, line, "db_cpu_us_per_mail", "a figure no run reported is left out")
	require.NotContains(t, line, "e2e_p99_ms", "not a steady run")

	var steady []*Result
	for _, p99 := range []float64{60, 90, 70} {
		steady = append(steady, &Result{Algorithm: Mailspool, Steady: true, E2EP99MS: p99})
	}
	s := Summarize(steady)[0]
	require.Equal(t, &Spread{Median: 70, Min: 60, Max: 90}, s.E2EP99MS)
	require.Contains(t, s.Line(), " e2e_p99_ms_median=70.00 e2e_p99_ms_min=60.00 e2e_p99_ms_max=90.00")
}

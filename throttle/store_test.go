package throttle

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/queue/dburl/dburltest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "modernc.org/sqlite"
)

type store struct {
	name string
	url  string
	db   *sql.DB
}

// forEachStore runs f on a fresh SQLite file, MariaDB database and
// PostgreSQL database, each migrated. Under CI=true an unreachable server
// fails the test; elsewhere its part is skipped saying how to start it.
func forEachStore(t *testing.T, f func(t *testing.T, s store)) {
	forEachStoreWith(t, false, f)
}

// forEachStoreWith is forEachStore, with the queue's tables too when
// withQueue.
func forEachStoreWith(t *testing.T, withQueue bool, f func(t *testing.T, s store)) {
	dburltest.Each(t, func(t *testing.T, name, u string) { f(t, openMigrated(t, name, u, withQueue)) })
}

func openMigrated(t testing.TB, name, u string, withQueue bool) store {
	t.Helper()
	db, err := dburl.Open(u)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	if withQueue {
		require.NoError(t, queue.Migrate(context.Background(), db))
	}
	require.NoError(t, Migrate(context.Background(), db))
	require.NoError(t, Migrate(context.Background(), db), "Migrate runs again")
	return store{name: name, url: u, db: db}
}

func openStore(t testing.TB, db *sql.DB) *Store {
	t.Helper()
	s, err := Open(db)
	require.NoError(t, err)
	return s
}

func denied(t *testing.T, err error) *Denied {
	t.Helper()
	var d *Denied
	require.True(t, errors.As(err, &d), "want a refusal, got %v", err)
	return d
}

// A slow rate, so that the time the test itself takes does not matter:
// the burst passes, the next send is refused with the interval's wait, a
// batch takes several sends in one step or none.
func TestRateBurstAndBatch(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		st := openStore(t, s.db)
		l := []Limit{{Key: "domain:gmail.example", Rate: Rate{N: 6, Per: time.Hour, Burst: 3}}} // one per 10 min
		require.NoError(t, st.Acquire(ctx, "a", 2, time.Minute, l), "a batch of 2 within the burst")
		d := denied(t, st.Acquire(ctx, "b", 2, time.Minute, l))
		assert.Equal(t, "rate", d.Reason)
		assert.Equal(t, "domain:gmail.example", d.Key)
		require.NoError(t, st.Acquire(ctx, "c", 1, time.Minute, l), "the burst's last send")
		d = denied(t, st.Acquire(ctx, "d", 1, time.Minute, l))
		assert.InDelta(t, 10*time.Minute, d.Wait, float64(5*time.Second), "wait about one interval")

		// Another key is not touched.
		require.NoError(t, st.Acquire(ctx, "e", 3, time.Minute, []Limit{{Key: "domain:other.example", Rate: Rate{N: 6, Per: time.Hour, Burst: 3}}}))

		n, wait, err := st.Available(ctx, s.db, l[0], 0)
		require.NoError(t, err)
		assert.Zero(t, n)
		assert.Greater(t, wait, 9*time.Minute)

		stat, err := st.Status(ctx)
		require.NoError(t, err)
		require.Len(t, stat, 2)
		assert.Equal(t, int64(3), stat[0].Granted)
		assert.Equal(t, int64(3), stat[0].Refused)
		assert.Greater(t, stat[0].Ahead, 20*time.Minute, "three sends at one per 10 min, burst 3: the schedule runs 30 min ahead")
	})
}

// All or nothing: a send refused by one limit takes nothing of the others.
func TestAcquireAllOrNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		st := openStore(t, s.db)
		dom := Limit{Key: "domain:a.example", Concurrency: 1}
		prov := Limit{Key: "provider:ses", Rate: Rate{N: 1, Per: time.Hour, Burst: 2}}
		require.NoError(t, st.Acquire(ctx, "h1", 1, time.Minute, []Limit{dom, prov}))
		denied(t, st.Acquire(ctx, "h2", 1, time.Minute, []Limit{prov, dom}))
		// h2's refusal by the domain's concurrency gave back its provider send.
		require.NoError(t, st.Acquire(ctx, "h3", 1, time.Minute, []Limit{prov}))
		denied(t, st.Acquire(ctx, "h4", 1, time.Minute, []Limit{prov}))
	})
}

func TestConcurrencySlots(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		st := openStore(t, s.db)
		l := []Limit{{Key: "domain:small.example", Concurrency: 3}}
		for _, h := range []string{"h1", "h2", "h3"} {
			require.NoError(t, st.Acquire(ctx, h, 1, time.Minute, l))
		}
		d := denied(t, st.Acquire(ctx, "h4", 1, time.Minute, l))
		assert.Equal(t, "concurrency", d.Reason)
		require.NoError(t, st.Release(ctx, "h2", []string{l[0].Key}))
		require.NoError(t, st.Acquire(ctx, "h4", 1, time.Minute, l))
		denied(t, st.Acquire(ctx, "h5", 1, time.Minute, l))
		stat, err := st.Status(ctx)
		require.NoError(t, err)
		assert.Equal(t, 3, stat[0].InFlight)
	})
}

// Many senders at once never hold more slots than the limit.
func TestConcurrencyRace(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		st := openStore(t, s.db)
		l := []Limit{{Key: "domain:race.example", Concurrency: 2}}
		var inFlight, most, granted atomic.Int64
		var wg sync.WaitGroup
		for g := range 6 {
			wg.Go(func() {
				for i := range 15 {
					h := fmt.Sprintf("g%d.%d", g, i)
					err := st.Acquire(ctx, h, 1, time.Minute, l)
					var d *Denied
					if errors.As(err, &d) {
						continue
					}
					if !assert.NoError(t, err) {
						return
					}
					granted.Add(1)
					n := inFlight.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					time.Sleep(2 * time.Millisecond)
					inFlight.Add(-1)
					assert.NoError(t, st.Release(ctx, h, []string{l[0].Key}))
				}
			})
		}
		wg.Wait()
		assert.LessOrEqual(t, most.Load(), int64(2))
		assert.Positive(t, granted.Load())
	})
}

// helperEnv makes the test binary a worker that takes a slot and waits to
// be killed (TestHolderProcess).
const helperEnv = "THROTTLE_TEST_HOLDER_URL"

func TestHolderProcess(t *testing.T) {
	u := os.Getenv(helperEnv)
	if u == "" {
		return // not run as the helper
	}
	db, err := dburl.Open(u)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	st, _ := Open(db)
	if err := st.Acquire(context.Background(), "killed-holder", 1, 1500*time.Millisecond, []Limit{{Key: "domain:kill.example", Concurrency: 1}}); err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fmt.Println("held")
	select {}
}

// A worker killed (SIGKILL) while it holds a slot: the slot is refused to
// others until its lease ends on the database's clock, and is there for
// the first attempt after that.
func TestKilledHolderSlotReturns(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		st := openStore(t, s.db)
		cmd := exec.Command(os.Args[0], "-test.run=^TestHolderProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"="+s.url)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		buf := make([]byte, 64)
		n, _ := out.Read(buf)
		require.Contains(t, string(buf[:n]), "held")
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()

		var expires int64
		require.NoError(t, s.db.QueryRowContext(ctx, st.d.Rebind(`SELECT expires FROM `+SlotsTable+` WHERE holder = ?`), "killed-holder").Scan(&expires))
		l := []Limit{{Key: "domain:kill.example", Concurrency: 1}}
		refused := 0
		for attempt := 0; ; attempt++ {
			before, err := st.Now(ctx)
			require.NoError(t, err)
			err = st.Acquire(ctx, "next", 1, time.Minute, l)
			if err == nil {
				break
			}
			denied(t, err)
			after, err := st.Now(ctx)
			require.NoError(t, err)
			require.LessOrEqual(t, before.UnixMicro(), expires, "refused although the killed holder's lease had ended")
			if after.UnixMicro() < expires {
				refused++
			}
			require.Less(t, attempt, 10000, "no progress: the slot never came back")
			time.Sleep(20 * time.Millisecond)
		}
		after, err := st.Now(ctx)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, after.UnixMicro(), expires, "the slot came back before the lease ended")
		assert.Positive(t, refused, "the killed holder's slot was held while its lease ran")
	})
}

func TestSlowAndPause(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		st := openStore(t, s.db)
		l := []Limit{{Key: "domain:gmail.example", Rate: Rate{N: 6, Per: time.Hour}}}
		require.NoError(t, st.Slow(ctx, l[0].Key, 0.5, time.Hour, time.Hour, "421 4.7.28"))
		require.NoError(t, st.Slow(ctx, l[0].Key, 0.8, time.Minute, time.Minute, "again"), "a milder slow-down keeps the lower factor")
		require.NoError(t, st.Acquire(ctx, "a", 1, time.Minute, l))
		d := denied(t, st.Acquire(ctx, "b", 1, time.Minute, l))
		assert.InDelta(t, 20*time.Minute, d.Wait, float64(5*time.Second), "half the rate: twice the interval")
		stat, err := st.Status(ctx)
		require.NoError(t, err)
		assert.InDelta(t, 0.5, stat[0].Factor, 0.001)
		assert.Equal(t, "again", stat[0].SlowReason)
		assert.Equal(t, int64(2), stat[0].Slowdowns)

		p := []Limit{{Key: "provider:api", Rate: Rate{N: 100, Per: time.Second}}}
		require.NoError(t, st.Pause(ctx, p[0].Key, time.Hour))
		d = denied(t, st.Acquire(ctx, "c", 1, time.Minute, p))
		assert.Greater(t, d.Wait, 59*time.Minute)

		assert.Error(t, st.Slow(ctx, "k", 1.5, time.Minute, time.Minute, ""))
	})
}

// A Retry-After stops every send of the key until it has passed, whatever
// the burst would allow (the burst's turns are not a way around it), also
// once the key is slowed down further, and the claim's look and schedule
// see it too. Once it has passed, the key lets out its burst again.
func TestPauseHoldsWithABurst(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		st := openStore(t, s.db)
		l := []Limit{{Key: "provider:api", Rate: Rate{N: 10, Per: time.Hour, Burst: 5}}} // one per 6 min, burst 5
		require.NoError(t, st.Pause(ctx, l[0].Key, 20*time.Minute))
		d := denied(t, st.Acquire(ctx, "right-after-pause", 1, time.Minute, l))
		assert.InDelta(t, 20*time.Minute, d.Wait, float64(5*time.Second), "wait for the pause's end")
		n, wait, err := st.Available(ctx, s.db, l[0], 0)
		require.NoError(t, err)
		assert.Zero(t, n, "the claim's look lets a paused key's mail go")
		assert.InDelta(t, 20*time.Minute, wait, float64(5*time.Second))
		first, _, err := st.Schedule(ctx, s.db, l[0], 1)
		require.NoError(t, err)
		assert.InDelta(t, 20*time.Minute, first, float64(5*time.Second), "a mail given back comes due when the pause ends")
		// Slowed down further while paused: still no send before the end.
		require.NoError(t, st.Slow(ctx, l[0].Key, 0.1, time.Hour, time.Hour, "later"))
		d = denied(t, st.Acquire(ctx, "slowed", 1, time.Minute, l))
		assert.Greater(t, d.Wait, 19*time.Minute)
		// A key with only a concurrency bound is stopped too.
		c := []Limit{{Key: "domain:conc.example", Concurrency: 5}}
		require.NoError(t, st.Pause(ctx, c[0].Key, 20*time.Minute))
		d = denied(t, st.Acquire(ctx, "conc", 1, time.Minute, c))
		assert.Greater(t, d.Wait, 19*time.Minute)

		// A short pause, on the database's clock: every attempt refused
		// until it has passed, then the whole burst at once.
		b := []Limit{{Key: "provider:short", Rate: Rate{N: 10, Per: time.Hour, Burst: 5}}}
		const pause = time.Second
		before, err := st.Now(ctx)
		require.NoError(t, err)
		require.NoError(t, st.Pause(ctx, b[0].Key, pause))
		after, err := st.Now(ctx)
		require.NoError(t, err)
		refused := 0
		for attempt := 0; ; attempt++ {
			tried, err := st.Now(ctx)
			require.NoError(t, err)
			err = st.Acquire(ctx, "burst", 5, time.Minute, b)
			done, nowErr := st.Now(ctx)
			require.NoError(t, nowErr)
			if err == nil {
				assert.GreaterOrEqual(t, done.Sub(before), pause, "the burst was let out before the pause had passed")
				break
			}
			d := denied(t, err)
			require.Less(t, tried.Sub(after), pause, "refused (%v) after the pause had passed", d)
			assert.LessOrEqual(t, d.Wait, pause)
			refused++
			require.Less(t, attempt, 10000, "no progress: the pause never ended")
			time.Sleep(20 * time.Millisecond)
		}
		assert.Positive(t, refused, "no attempt was made while the pause held")
		d = denied(t, st.Acquire(ctx, "after-burst", 1, time.Minute, b))
		assert.Equal(t, "rate", d.Reason)
	})
}

func TestFactorRecoversGradually(t *testing.T) {
	k := keyState{factor: 0.5, slowUntil: 1000, recoverUntil: 3000}
	assert.Equal(t, 0.5, k.factorAt(500))
	assert.Equal(t, 0.5, k.factorAt(1000))
	assert.InDelta(t, 0.75, k.factorAt(2000), 1e-9)
	assert.Equal(t, 1.0, k.factorAt(3000))
}

func TestBadLimits(t *testing.T) {
	s := openMigrated(t, "sqlite", "sqlite:"+filepath.Join(t.TempDir(), "q.db"), false)
	st := openStore(t, s.db)
	ctx := context.Background()
	for _, l := range []Limit{{Key: ""}, {Key: "k", Rate: Rate{N: 1}}, {Key: "k", Concurrency: -1}, {Key: "k", Rate: Rate{N: -1, Per: time.Second}}} {
		assert.Error(t, st.Acquire(ctx, "h", 1, time.Minute, []Limit{l}), "%+v", l)
	}
	_, err := SchemaSQL("oracle")
	assert.ErrorContains(t, err, "unknown store")
}

// Two claims that give mail back at once: the second claim's Schedule
// waits for the first to end and hands out the turns after those the
// first committed. It read sched without the key's lock: in READ
// COMMITTED both claims were promised the same turns, and in READ
// UNCOMMITTED (the level of the queue's claims on MariaDB) the second
// read the first's turns before that claim had committed, and kept
// behind them after it rolled back.
func TestScheduleTwoClaimsAtOnceGetTheirOwnTurns(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		if s.name == "sqlite" {
			t.Skip("SQLite's IMMEDIATE transactions serialize the claims: two cannot schedule at once")
		}
		ctx := context.Background()
		st := openStore(t, s.db)
		levels := []*sql.TxOptions{st.txOptions()}
		if s.name == "mariadb" {
			levels = append(levels, &sql.TxOptions{Isolation: sql.LevelReadUncommitted})
		}
		key := 0
		for _, opts := range levels {
			for _, commit := range []bool{true, false} {
				name := opts.Isolation.String() + "/first-commits"
				if !commit {
					name = opts.Isolation.String() + "/first-rolls-back"
				}
				t.Run(name, func(t *testing.T) {
					key++
					l := Limit{Key: fmt.Sprintf("domain:sched%d.example", key), Rate: Rate{N: 6, Per: time.Hour}} // one turn per 10 min
					_, _, err := st.Available(ctx, s.db, l, 0)
					require.NoError(t, err)
					tx1, err := s.db.BeginTx(ctx, opts)
					require.NoError(t, err)
					defer tx1.Rollback() //nolint:errcheck // a no-op after Commit
					tx2, err := s.db.BeginTx(ctx, opts)
					require.NoError(t, err)
					defer tx2.Rollback() //nolint:errcheck // a no-op after Commit
					first1, _, err := st.Schedule(ctx, tx1, l, 3)
					require.NoError(t, err)
					type res struct {
						first time.Duration
						err   error
					}
					done := make(chan res, 1)
					go func() { f, _, err := st.Schedule(ctx, tx2, l, 3); done <- res{f, err} }()
					// Only lets the second claim reach its statement: with
					// the key locked it waits for the first to end whatever
					// the timing, and the checks below do not depend on it.
					time.Sleep(300 * time.Millisecond)
					if commit {
						require.NoError(t, tx1.Commit())
					} else {
						require.NoError(t, tx1.Rollback())
					}
					r := <-done
					require.NoError(t, r.err)
					require.NoError(t, tx2.Commit())
					if commit {
						assert.GreaterOrEqual(t, r.first, first1+25*time.Minute,
							"the second claim was promised turns from %v, the first claim's three turns run from %v: the same turns promised twice", r.first, first1)
					} else {
						assert.Less(t, r.first, 5*time.Minute, "the second claim waits behind the turns of a claim that rolled back")
					}
				})
			}
		}
	})
}

// Two claims that give back mail of the same two keys, met in opposite
// orders, at once: each schedules the keys in key order, as Acquire takes
// them, so neither holds one key's lock while it waits for the other's
// (in the order met, most rounds ended in a deadlock, one claim failing).
// The rounds only make the two claims meet: with the keys in one order
// no interleaving deadlocks.
func TestScreenTwoClaimsInOppositeOrdersDoNotDeadlock(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		if s.name == "sqlite" {
			t.Skip("SQLite's IMMEDIATE transactions serialize the claims: two cannot hold a key each")
		}
		ctx := context.Background()
		st := openStore(t, s.db)
		p := &Policy{Lane: "default", Store: st, Groups: []Group{
			{Name: "a", Match: []string{"a.example"}, Rate: Rate{N: 1, Per: time.Hour}},
			{Name: "b", Match: []string{"b.example"}, Rate: Rate{N: 1, Per: time.Hour}},
		}}
		_, err := p.Throttle()
		require.NoError(t, err)
		claims := [][]string{
			{"u@a.example", "v@a.example", "u@b.example", "v@b.example"},
			{"u@b.example", "v@b.example", "u@a.example", "v@a.example"},
		}
		for range 20 {
			var wg sync.WaitGroup
			for _, addrs := range claims {
				wg.Go(func() {
					tx, err := s.db.BeginTx(ctx, st.txOptions())
					if !assert.NoError(t, err) {
						return
					}
					defer tx.Rollback() //nolint:errcheck // a no-op after Commit
					_, err = p.screen(ctx, tx, addrs)
					if assert.NoError(t, err, "a claim of %v", addrs) {
						assert.NoError(t, tx.Commit())
					}
				})
			}
			wg.Wait()
			if t.Failed() {
				return
			}
		}
	})
}

// A table of an earlier version, made before the sched column or before
// the paused_until column, gets the columns it lacks from Migrate.
func TestMigrateAddsLaterColumns(t *testing.T) {
	for _, earlier := range []struct{ name, sched string }{{"first", ""}, {"with-sched", "sched BIGINT NOT NULL DEFAULT 0, "}} {
		t.Run(earlier.name, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, s store) {
				ctx := context.Background()
				_, err := s.db.ExecContext(ctx, `DROP TABLE `+KeysTable)
				require.NoError(t, err)
				_, err = s.db.ExecContext(ctx, `CREATE TABLE `+KeysTable+` (name VARCHAR(190) NOT NULL PRIMARY KEY, tat BIGINT NOT NULL DEFAULT 0, `+earlier.sched+`
  slow_factor REAL NOT NULL DEFAULT 1, slow_until BIGINT NOT NULL DEFAULT 0, recover_until BIGINT NOT NULL DEFAULT 0,
  slow_reason VARCHAR(255) NOT NULL DEFAULT '', slowdowns BIGINT NOT NULL DEFAULT 0, granted BIGINT NOT NULL DEFAULT 0, refused BIGINT NOT NULL DEFAULT 0)`)
				require.NoError(t, err)
				require.NoError(t, Migrate(ctx, s.db))
				require.NoError(t, Migrate(ctx, s.db))
				st := openStore(t, s.db)
				l := Limit{Key: "domain:m.example", Rate: Rate{N: 6, Per: time.Hour}}
				require.NoError(t, st.Acquire(ctx, "h", 1, time.Minute, []Limit{l}))
				first, step, err := st.Schedule(ctx, s.db, l, 3)
				require.NoError(t, err)
				assert.InDelta(t, 10*time.Minute, first, float64(5*time.Second), "after the turn taken")
				assert.Equal(t, 10*time.Minute, step)
				first, _, err = st.Schedule(ctx, s.db, l, 1)
				require.NoError(t, err)
				assert.InDelta(t, 40*time.Minute, first, float64(5*time.Second), "after the three turns handed out")
				require.NoError(t, st.Pause(ctx, l.Key, time.Hour))
				assert.Equal(t, "paused", denied(t, st.Acquire(ctx, "h2", 1, time.Minute, []Limit{l})).Reason)
			})
		})
	}
}

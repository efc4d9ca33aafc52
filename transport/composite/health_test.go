package composite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/queue/dburl/dburltest"
	"github.com/mailspool/mailspool/transport/composite"
)

// stores opens a fresh migrated database on each store, twice: two
// handles stand for two worker processes.
func stores(t *testing.T) map[string]func(t *testing.T) (*sql.DB, *sql.DB) {
	open := func(t *testing.T, u string) (*sql.DB, *sql.DB) {
		var dbs [2]*sql.DB
		for i := range dbs {
			db, err := dburl.Open(u)
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			dbs[i] = db
		}
		require.NoError(t, composite.Migrate(context.Background(), dbs[0]))
		require.NoError(t, composite.Migrate(context.Background(), dbs[0]), "Migrate is idempotent")
		return dbs[0], dbs[1]
	}
	return map[string]func(t *testing.T) (*sql.DB, *sql.DB){
		"sqlite":   func(t *testing.T) (*sql.DB, *sql.DB) { return open(t, "sqlite:"+filepath.Join(t.TempDir(), "h.db")) },
		"mariadb":  func(t *testing.T) (*sql.DB, *sql.DB) { return open(t, dburltest.MariaDB.Fresh(t)) },
		"postgres": func(t *testing.T) (*sql.DB, *sql.DB) { return open(t, dburltest.Postgres.Fresh(t)) },
	}
}

// TestSQLHealthIsShared: what one process marks shows in another within
// its refresh; one probe is claimed across processes; pins are shared.
func TestSQLHealthIsShared(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db1, db2 := open(t)
			h1, err := composite.NewSQL(db1)
			require.NoError(t, err)
			h2, err := composite.NewSQL(db2)
			require.NoError(t, err)
			h2.Refresh = 200 * time.Millisecond

			down, err := h2.Down(ctx, "tx")
			require.NoError(t, err)
			assert.Empty(t, down)
			now := time.Now().Truncate(time.Millisecond)
			marked(t, true)(h1.MarkDown(ctx, "tx", "smtp://a", "connection: refused", now, now.Add(30*time.Second)))
			marked(t, true)(h1.MarkDown(ctx, "tx", "smtp://a", "connection: refused again", now.Add(time.Second), now.Add(31*time.Second)))
			marked(t, true)(h1.MarkDown(ctx, "other", "smtp://a", "x", now, now))
			// Within h2's refresh the change shows: h2's cache is older than
			// the marks, so a look that begins once a refresh (and a margin)
			// has passed since them reads the table. The time is taken before
			// the look, so that a look slowed by a busy machine is not judged
			// by when it returned.
			deadline := time.Now().Add(h2.Refresh + 100*time.Millisecond)
			for {
				late := time.Now().After(deadline)
				down, err = h2.Down(ctx, "tx")
				require.NoError(t, err)
				if len(down) > 0 || late {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			require.Contains(t, down, "smtp://a")
			assert.Len(t, down, 1)
			assert.Equal(t, now, down["smtp://a"].DownSince, "the first down time is kept")
			assert.Equal(t, now.Add(31*time.Second), down["smtp://a"].NextProbe)
			assert.Equal(t, "connection: refused again", down["smtp://a"].Reason)

			// Before the probe is due nobody claims it; when due, one of
			// many concurrent claimers across both handles does.
			ok, err := h1.ClaimProbe(ctx, "tx", "smtp://a", now.Add(30*time.Second), now.Add(60*time.Second))
			require.NoError(t, err)
			assert.False(t, ok)
			var won atomic.Int32
			var wg sync.WaitGroup
			for i := range 8 {
				h := h1
				if i%2 == 1 {
					h = h2
				}
				wg.Go(func() {
					ok, err := h.ClaimProbe(ctx, "tx", "smtp://a", now.Add(32*time.Second), now.Add(62*time.Second))
					assert.NoError(t, err)
					if ok {
						won.Add(1)
					}
				})
			}
			wg.Wait()
			assert.Equal(t, int32(1), won.Load(), "one half-open probe")

			require.NoError(t, h2.MarkUp(ctx, "tx", "smtp://a", now.Add(33*time.Second)))
			down, err = h1.Down(ctx, "tx")
			require.NoError(t, err)
			assert.Empty(t, down)
			members, err := h1.Members(ctx, "tx")
			require.NoError(t, err)
			require.Len(t, members, 1)
			assert.True(t, members[0].DownSince.IsZero())

			pinned, err := h2.Pinned(ctx, "tx", "m1@shop.example")
			require.NoError(t, err)
			assert.Empty(t, pinned)
			require.NoError(t, h1.Pin(ctx, "tx", "m1@shop.example", "smtp://a", now))
			require.NoError(t, h1.Pin(ctx, "tx", "m1@shop.example", "smtp://b", now), "the first pin stays")
			pinned, err = h2.Pinned(ctx, "tx", "m1@shop.example")
			require.NoError(t, err)
			assert.Equal(t, "smtp://a", pinned)
		})
	}
}

// TestLateDownLosesToNewerUp: a send that began before the member came
// back up and failed after it (a slow probe overtaken by another
// worker's successful one) does not take the member down again; a
// failure of a send that began after the up does. On every store and in
// memory, the writes in that order from two handles (two processes).
func TestLateDownLosesToNewerUp(t *testing.T) {
	check := func(t *testing.T, h1, h2 composite.Health) {
		ctx := context.Background()
		t0 := time.Now().Truncate(time.Millisecond)
		isDown := func(h composite.Health) (composite.State, bool) {
			t.Helper()
			if s, ok := h.(*composite.SQL); ok {
				s.Refresh = 0
			}
			down, err := h.Down(ctx, "tx")
			require.NoError(t, err)
			st, ok := down["smtp://a"]
			return st, ok
		}

		// The first failure creates the member's row, down.
		marked(t, true)(h1.MarkDown(ctx, "tx", "smtp://a", "connection: reset", t0, t0.Add(30*time.Second)))
		st, down := isDown(h2)
		require.True(t, down)
		assert.Equal(t, t0, st.DownSince)

		// Worker 2's probe, sent at t0+31s, succeeds at t0+32s; worker 1's
		// slow probe, sent at t0+30s, fails at t0+33s and reports after.
		require.NoError(t, h2.MarkUp(ctx, "tx", "smtp://a", t0.Add(32*time.Second)))
		marked(t, false)(h1.MarkDown(ctx, "tx", "smtp://a", "connection: reset (late)", t0.Add(30*time.Second), t0.Add(63*time.Second)))
		_, down = isDown(h2)
		assert.False(t, down, "a failure of a send that began before the member came up took it down again")
		_, down = isDown(h1)
		assert.False(t, down)

		// A send that began after the up and failed is news: down again,
		// since that send began.
		marked(t, true)(h1.MarkDown(ctx, "tx", "smtp://a", "connection: refused", t0.Add(40*time.Second), t0.Add(70*time.Second)))
		st, down = isDown(h2)
		require.True(t, down, "a failure after the up was ignored")
		assert.Equal(t, t0.Add(40*time.Second), st.DownSince)
		assert.Equal(t, t0.Add(70*time.Second), st.NextProbe)
		assert.Equal(t, "connection: refused", st.Reason)

		// While down, a later report keeps the first down time and moves
		// the probe (a failed probe).
		marked(t, true)(h2.MarkDown(ctx, "tx", "smtp://a", "connection: refused again", t0.Add(70*time.Second), t0.Add(100*time.Second)))
		st, down = isDown(h1)
		require.True(t, down)
		assert.Equal(t, t0.Add(40*time.Second), st.DownSince)
		assert.Equal(t, t0.Add(100*time.Second), st.NextProbe)
		// A report written late, with an earlier next probe, does not
		// bring the probe forward (a claim may just have pushed it back).
		marked(t, true)(h1.MarkDown(ctx, "tx", "smtp://a", "connection: reset (late)", t0.Add(60*time.Second), t0.Add(90*time.Second)))
		st, down = isDown(h2)
		require.True(t, down)
		assert.Equal(t, t0.Add(100*time.Second), st.NextProbe, "a late report made the probe due earlier")

		// Another lane's member of the same name is its own row.
		require.NoError(t, h1.MarkUp(ctx, "other", "smtp://a", t0.Add(200*time.Second)))
		_, down = isDown(h2)
		assert.True(t, down)
	}
	t.Run("memory", func(t *testing.T) {
		h := &composite.Memory{}
		check(t, h, h)
	})
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			db1, db2 := open(t)
			h1, err := composite.NewSQL(db1)
			require.NoError(t, err)
			h2, err := composite.NewSQL(db2)
			require.NoError(t, err)
			check(t, h1, h2)
		})
	}
}

// marked returns a check of a MarkDown's results: no error, and the
// member down after it as want says.
func marked(t testing.TB, want bool) func(down bool, err error) {
	return func(down bool, err error) {
		t.Helper()
		require.NoError(t, err)
		require.Equal(t, want, down, "down after MarkDown")
	}
}

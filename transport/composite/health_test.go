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
			require.NoError(t, h1.MarkDown(ctx, "tx", "smtp://a", "connection: refused", now, now.Add(30*time.Second)))
			require.NoError(t, h1.MarkDown(ctx, "tx", "smtp://a", "connection: refused again", now.Add(time.Second), now.Add(31*time.Second)))
			require.NoError(t, h1.MarkDown(ctx, "other", "smtp://a", "x", now, now))
			// Within h2's refresh the change shows.
			deadline := time.Now().Add(h2.Refresh + 100*time.Millisecond)
			for {
				down, err = h2.Down(ctx, "tx")
				require.NoError(t, err)
				if len(down) > 0 || time.Now().After(deadline) {
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

			require.NoError(t, h2.MarkUp(ctx, "tx", "smtp://a"))
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

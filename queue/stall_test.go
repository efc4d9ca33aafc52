package queue

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/internal/netstall"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/transport"
)

// TestDatabaseStallMidStatement puts a proxy (internal/netstall) between a worker and its
// MariaDB or PostgreSQL server, and in the middle of a drain cuts the path
// a few bytes into the next statement: every connection the worker holds
// stops answering without being closed (no RST, no FIN), and new ones are
// accepted and never answered, for longer than the worker's statement
// bounds and its leases. Then new connections work again. The worker must
// not hang on a dead connection: it drains the rest on new ones (the wait
// is for progress; a worker blocked forever makes none), and every mail is
// sent exactly once and recorded sent, none left sending. SQLite has no
// network path to stall.
func TestDatabaseStallMidStatement(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"mariadb", "postgres"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var s store
			if name == "mariadb" {
				s = newMariaDBStore(t)
			} else {
				s = newPostgresStore(t)
			}
			u, err := url.Parse(s.url)
			require.NoError(t, err)
			p := netstall.New(t, u.Host)
			u.Host = p.Addr()
			db, err := dburl.Open(u.String())
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })

			const n = 300
			lane := Lane{RecipientLimit: NoLimit}
			q := newQueue(t, s.db, lane, nil)
			enqueueN(t, q, n)
			tr := newFuncTransport(func(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
				time.Sleep(20 * time.Millisecond)
				return transport.Receipt{MessageID: "<" + m.MessageID + ">"}, nil
			})
			var problems problemLog
			w, err := NewWorker(newQueue(t, db, lane, nil), tr, &WorkerOptions{
				ID: "stalled", Batch: 20, Concurrency: 4, PollInterval: 50 * time.Millisecond,
				LeaseMargin: 5 * time.Second, Logger: problems.logger(),
			})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ran := make(chan error, 1)
			go func() { ran <- w.Run(ctx) }()
			defer func() {
				if t.Failed() {
					for _, l := range problems.Lines() {
						t.Log(l)
					}
				}
			}()

			sent := func() int { return countRows(t, s.db, q.table, "status = 2") }
			waitProgress(t, "before the stall", 60*time.Second, n/4, sent)
			p.StallAfter(10)
			for !p.Stalled() {
				time.Sleep(5 * time.Millisecond)
			}
			atStall := tr.total.Load()
			// Longer than a statement's bound (statementTimeout + 5 s) and
			// than the lease margin.
			time.Sleep(20 * time.Second)
			p.Heal()
			t.Logf("sends at the stall %d, after it %d", atStall, tr.total.Load())

			waitProgress(t, "after the stall", 60*time.Second, n, sent)
			cancel()
			require.NoError(t, <-ran)

			assert.Len(t, tr.sends, n)
			for id, c := range tr.sends {
				if c != 1 {
					t.Errorf("message %s sent %d times", id, c)
				}
			}
			assert.Equal(t, 0, countRows(t, s.db, q.table, "status <> 2 OR locked_by <> ''"), "rows not sent, or still leased")
			st := w.Stats()
			t.Logf("worker: %+v", st)
			assert.NotZero(t, st.DBErrors, "the worker saw no database error: the stall was not met")
		})
	}
}

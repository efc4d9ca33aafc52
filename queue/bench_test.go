package queue

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// BenchmarkDrain measures the queue's own cost per mail: claim, a no-op
// send, and the batched fenced completion, with one worker running as in
// production (Run: batch 100, concurrency 8, overlapping batches). Report: ns/op per mail; compare SQLite and MariaDB in one run:
//
//	go test -run '^$' -bench Drain -benchtime 20000x ./queue
func BenchmarkDrain(b *testing.B) {
	for _, name := range []string{"sqlite", "mariadb"} {
		b.Run(name, func(b *testing.B) {
			var s store
			if name == "sqlite" {
				s = newSQLiteStore(b)
			} else {
				s = newMariaDBStore(b)
			}
			lane := Lane{RecipientLimit: NoLimit}
			q := newQueue(b, s.db, lane, nil)
			enqueueN(b, q, b.N)
			tr := newFuncTransport(func(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
				return transport.Receipt{MessageID: m.MessageID}, nil
			})
			w, err := NewWorker(q, tr, &WorkerOptions{Batch: 100, Concurrency: 8, PollInterval: time.Millisecond, Logger: quietLogger(), CleanupInterval: -1})
			require.NoError(b, err)
			ctx, cancel := context.WithCancel(context.Background())
			b.ResetTimer()
			start := time.Now()
			done := make(chan struct{})
			go func() { defer close(done); assert.NoError(b, w.Run(ctx)) }()
			for w.Stats().Sent < int64(b.N) {
				time.Sleep(time.Millisecond)
			}
			cancel()
			<-done
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "mails/s")
		})
	}
}

// BenchmarkEnqueue compares, in the same transaction shape (BEGIN, the
// enqueue, COMMIT; 4 goroutines, one mail per transaction), the bare INSERT
// of a row with Enqueue without limits (one statement), the same INSERT
// under a savepoint (what every enqueue used to cost), and Enqueue with
// both rate limits on (never reached). Two more variants bound what any
// limit counted in the caller's transaction can cost: the bare INSERT after
// a round trip that does nothing ("roundtrip": SELECT 1), and after the
// least write a counter needs ("counter": a one-row UPDATE ... SET n = n +
// 1 by primary key of an existing counter row). The variants take turns, so each
// sees the same load on a busy machine; each reports its mean transaction
// time (ns/<variant>) and its speed relative to the bare INSERT
// (%bare-<variant>, higher is better):
//
//	go test -run '^$' -bench Enqueue -benchtime 4000x ./queue
func BenchmarkEnqueue(b *testing.B) {
	big := Limit{N: 1 << 30, Per: time.Hour}
	for _, name := range []string{"sqlite", "mariadb"} {
		b.Run(name, func(b *testing.B) {
			var s store
			if name == "sqlite" {
				s = newSQLiteStore(b)
			} else {
				s = newMariaDBStore(b)
			}
			plain := newQueue(b, s.db, Lane{RecipientLimit: NoLimit, IPLimit: NoLimit}, nil)
			limited := newQueue(b, s.db, Lane{RecipientLimit: big, IPLimit: big}, nil)
			opts := enqueueOptions{maxAttempts: 5}
			variants := []struct {
				name string
				f    func(ctx context.Context, tx *sql.Tx, m *transport.Message, i int64) error
			}{
				{"bare", func(ctx context.Context, tx *sql.Tx, m *transport.Message, _ int64) error {
					_, err := plain.insertRow(ctx, tx, m, &opts, time.Now())
					return err
				}},
				{"enqueue", func(ctx context.Context, tx *sql.Tx, m *transport.Message, _ int64) error {
					_, err := plain.Enqueue(ctx, tx, m)
					return err
				}},
				{"savepoint", func(ctx context.Context, tx *sql.Tx, m *transport.Message, _ int64) error {
					_, err := plain.enqueueSavepoint(ctx, tx, m, &opts, time.Now())
					return err
				}},
				{"limits", func(ctx context.Context, tx *sql.Tx, m *transport.Message, i int64) error {
					_, err := limited.Enqueue(ctx, tx, m, ClientIP(fmt.Sprintf("192.0.2.%d", i%250+1)))
					return err
				}},
				{"roundtrip", func(ctx context.Context, tx *sql.Tx, m *transport.Message, _ int64) error {
					if _, err := tx.ExecContext(ctx, "SELECT 1"); err != nil {
						return err
					}
					_, err := plain.insertRow(ctx, tx, m, &opts, time.Now())
					return err
				}},
				{"counter", func(ctx context.Context, tx *sql.Tx, m *transport.Message, i int64) error {
					res, err := tx.ExecContext(ctx, `UPDATE `+limited.limits+` SET n = n + 1 WHERE lkey = ?`, fmt.Sprintf("floor-%d", i%250))
					if err != nil {
						return err
					}
					if n, err := res.RowsAffected(); err != nil || n != 1 {
						return fmt.Errorf("counter floor: %d rows updated (%v)", n, err)
					}
					_, err = plain.insertRow(ctx, tx, m, &opts, time.Now())
					return err
				}},
			}
			for i := range 250 {
				_, err := s.db.Exec(`INSERT INTO `+limited.limits+` (lkey, window_start, n) VALUES (?, 0, 0)`, fmt.Sprintf("floor-%d", i))
				require.NoError(b, err)
			}
			var (
				n     atomic.Int64
				total [6]atomic.Int64
				count [6]atomic.Int64
			)
			ctx := context.Background()
			b.SetParallelism(2) // 4 goroutines on this 2-core machine
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					v := int(i % int64(len(variants)))
					m := testMessage("user" + strconv.FormatInt(i, 10) + "@example.com")
					start := time.Now()
					tx, err := s.db.BeginTx(ctx, nil)
					if err == nil {
						if err = variants[v].f(ctx, tx, m, i); err == nil {
							err = tx.Commit()
						} else {
							_ = tx.Rollback()
						}
					}
					if err != nil {
						b.Error(err)
						return
					}
					total[v].Add(int64(time.Since(start)))
					count[v].Add(1)
				}
			})
			mean := func(v int) float64 { return float64(total[v].Load()) / float64(max(count[v].Load(), 1)) }
			for v, variant := range variants {
				b.ReportMetric(mean(v), "ns/"+variant.name)
				if v > 0 {
					b.ReportMetric(100*mean(0)/mean(v), "%bare-"+variant.name)
				}
			}
		})
	}
}

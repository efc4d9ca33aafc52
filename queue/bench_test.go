package queue

import (
	"context"
	"database/sql"
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
// of a row with Enqueue without limits (one statement), the same under a
// savepoint (what every enqueue used to cost), and Enqueue with both rate
// limits on (never reached). Report: ns/op per mail; compare within one run:
//
//	go test -run '^$' -bench Enqueue -benchtime 3000x ./queue
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
			cases := []struct {
				name string
				f    func(ctx context.Context, tx *sql.Tx, m *transport.Message) error
			}{
				{"bare-insert", func(ctx context.Context, tx *sql.Tx, m *transport.Message) error {
					_, err := plain.insertRow(ctx, tx, m, &opts, time.Now())
					return err
				}},
				{"enqueue", func(ctx context.Context, tx *sql.Tx, m *transport.Message) error {
					_, err := plain.Enqueue(ctx, tx, m)
					return err
				}},
				{"insert-under-savepoint", func(ctx context.Context, tx *sql.Tx, m *transport.Message) error {
					_, err := plain.enqueueSavepoint(ctx, tx, m, &opts, time.Now())
					return err
				}},
				{"enqueue-limits", func(ctx context.Context, tx *sql.Tx, m *transport.Message) error {
					_, err := limited.Enqueue(ctx, tx, m, ClientIP("192.0.2.7"))
					return err
				}},
			}
			for _, c := range cases {
				b.Run(c.name, func(b *testing.B) {
					ctx := context.Background()
					var n atomic.Int64
					b.SetParallelism(2) // 4 goroutines on this 2-core machine
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							m := testMessage("user" + strconv.FormatInt(n.Add(1), 10) + "@example.com")
							tx, err := s.db.BeginTx(ctx, nil)
							if err == nil {
								if err = c.f(ctx, tx, m); err == nil {
									err = tx.Commit()
								} else {
									_ = tx.Rollback()
								}
							}
							if err != nil {
								b.Error(err)
								return
							}
						}
					})
				})
			}
		})
	}
}

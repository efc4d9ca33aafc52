package queue

import (
	"context"
	"testing"
	"time"

	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/require"
)

// BenchmarkDrain measures the queue's own cost per mail: claim, a no-op
// send, and the batched fenced completion, with one worker (batch 100,
// concurrency 8). Report: ns/op per mail; compare SQLite and MariaDB in one run:
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
			w, err := NewWorker(q, tr, &WorkerOptions{Batch: 100, Concurrency: 8, Logger: quietLogger(), CleanupInterval: -1})
			require.NoError(b, err)
			ctx := context.Background()
			b.ResetTimer()
			start := time.Now()
			done := 0
			for done < b.N {
				n, err := w.cycle(ctx, 100)
				require.NoError(b, err)
				done += n
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "mails/s")
		})
	}
}

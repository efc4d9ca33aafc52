package queue

import (
	"context"
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

package bench

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/mail"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mailspool/mailspool/transport"
)

// benchTemplate marks the rows a run enqueues; historyTemplate the rows of
// the pre-filled history, which later runs reuse.
const (
	benchTemplate   = "bench"
	historyTemplate = "bench-history"
)

// Bodies of about 4 KB in all, as a rendered transactional mail.
var (
	textBody = strings.Repeat("Hello, please confirm your address by opening the link below. ", 31)[:1900]
	htmlBody = "<html><body><p>" + strings.Repeat("Hello, please confirm your address by opening the link below. ", 33)[:2000] + "</p></body></html>"
)

// message returns mail number i of the run; its Message-ID identifies it.
func message(run string, i int) *transport.Message {
	return &transport.Message{
		MessageID: messageID(run, i),
		From:      mail.Address{Name: "Shop", Address: "noreply@shop.example"},
		To:        mail.Address{Name: "Customer", Address: fmt.Sprintf("user%d@example.com", i)},
		Subject:   "Please confirm your address",
		Text:      textBody,
		HTML:      htmlBody,
		Headers:   []transport.Header{{Name: "List-Unsubscribe", Value: "<https://shop.example/u/1>"}},
	}
}

func messageID(run string, i int) string {
	return fmt.Sprintf("bench.%s.%d@shop.example", run, i)
}

func messageIDs(run string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = messageID(run, i)
	}
	return ids
}

// runID tells this run's Message-IDs from an earlier run's.
func runID() string { return fmt.Sprintf("%x", time.Now().UnixNano()) }

// enqueueFunc enqueues mail i in tx.
type enqueueFunc func(ctx context.Context, tx *sql.Tx, i int) error

// produce runs producers goroutines that enqueue n mails, each in its own
// transaction, and returns mails per second and the p99 transaction time
// (begin to commit) in ms. committed, when not nil, receives each mail's
// commit time by its number.
func produce(ctx context.Context, db *sql.DB, producers, n int, progress io.Writer, label string, committed []time.Time, enqueue enqueueFunc) (float64, float64, error) {
	var next, done atomic.Int64
	lat := make([][]time.Duration, producers)
	errs := make([]error, producers)
	var wg sync.WaitGroup
	start := time.Now()
	stopProgress, progressStopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(progressStopped)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		prev := int64(0)
		for {
			select {
			case <-stopProgress:
				return
			case now := <-tick.C:
				d := done.Load()
				fmt.Fprintf(progress, "%s: enqueue %d/%d, %d/s, %.0fs\n", label, d, n, d-prev, now.Sub(start).Seconds())
				prev = d
			}
		}
	}()
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				err := inTx(ctx, db, func(tx *sql.Tx) error { return enqueue(ctx, tx, i) })
				if err != nil {
					errs[p] = fmt.Errorf("bench: enqueue of mail %d: %w", i, err)
					return
				}
				end := time.Now()
				if committed != nil {
					committed[i] = end
				}
				lat[p] = append(lat[p], end.Sub(t0))
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stopProgress)
	<-progressStopped // the caller writes to progress next
	elapsed := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return 0, 0, err
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	return float64(n) / elapsed.Seconds(), percentile(all, 99), nil
}

func inTx(ctx context.Context, db *sql.DB, f func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// attachmentData returns n bytes that do not compress (nil for 0), shared
// by every mail of a run.
func attachmentData(n int) []byte {
	if n <= 0 {
		return nil
	}
	b := make([]byte, n)
	x := uint64(0x9E3779B97F4A7C15)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

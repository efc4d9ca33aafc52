package queue

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// On PostgreSQL a committed enqueue wakes idle workers at once, in any
// process: the enqueue's INSERT sends a notification on the lane's channel
// (pg_notify in its RETURNING, so it costs no round trip), which the server
// delivers when, and only if, the enqueue's transaction commits. Each
// worker LISTENs on one connection of its own, taken from the queue's
// handle for as long as it runs. When that connection is lost the worker
// goes on polling at its interval, as on the other stores, and listens
// again on a new connection (after listenRetry, doubling up to the poll
// interval while it keeps failing), waking itself once it does, for what
// was enqueued meanwhile.

// Only the workers in front listen. Every commit that notifies signals
// every listening connection, and each of their workers reads every
// notification: 16 workers listening on a lane drained a steady stream
// at about half the rate of 4 (bench --steady, 800 mails/s), with a p99
// of 56-60 ms; 4 of the 16 listening, 744-805 mails/s against 441-487,
// p99 32-37 ms. A worker standing back as far as it goes (wake.go) has
// lost mail to the workers in front twice in a row: it stops listening
// and polls, and listens again when it steps forward. A worker standing
// back that finds mail waiting for longer than the poll interval comes to
// the front at once (standBack), so a lane whose listeners all stood back
// is served again within its workers' polls.

// notifyChannel is the channel of table's notifications: "ms:" and the
// table name, at most 60 bytes (PostgreSQL allows 63).
func notifyChannel(table string) string { return "ms:" + table }

// listenRetry is the first wait before listening again after the
// listening connection was lost.
const listenRetry = 100 * time.Millisecond

// listenLoop keeps the worker listening on its lane's channel until ctx
// ends.
func (w *Worker) listenLoop(ctx context.Context) {
	retry := backoff{min: listenRetry, max: max(listenRetry, w.opts.PollInterval)}
	for ctx.Err() == nil {
		if w.unlisten.Load() {
			select {
			case <-ctx.Done():
				return
			case <-w.listenChange:
			}
			continue
		}
		// Listen until ctx ends, the connection fails, or the worker
		// stands back all the way (setListening).
		lctx, cancel := context.WithCancel(ctx)
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			for {
				select {
				case <-lctx.Done():
					return
				case <-w.listenChange:
					if w.unlisten.Load() {
						cancel()
						return
					}
				}
			}
		}()
		err := w.q.listen(lctx, func() {
			retry.reset()
			w.log.Debug("listening for enqueues", "channel", notifyChannel(w.q.lane.Table))
			w.Wake() // for what was enqueued while this worker did not listen
		}, func(payload string) {
			w.announce(payload)
			w.Wake()
		})
		cancel()
		<-stopped
		if ctx.Err() != nil {
			return
		}
		if w.unlisten.Load() {
			w.log.Debug("standing back: polling instead of listening", "channel", notifyChannel(w.q.lane.Table))
			continue
		}
		pause := retry.next()
		w.log.Warn("lost the connection listening for enqueues: polling until it is back", "err", err, "retry_in", pause)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
	}
}

// setListening tells the worker's listenLoop whether to listen (the
// claim loop's, as the worker steps back and forward). It never blocks.
func (w *Worker) setListening(on bool) {
	if w.unlisten.Swap(!on) == !on {
		return // no change
	}
	select {
	case w.listenChange <- struct{}{}:
	default:
	}
}

// listen takes a connection of the queue's handle, LISTENs on the lane's
// channel, calls listening, then notified for each notification, until
// ctx ends or the connection fails. The connection is closed afterwards,
// never given back to the pool still listening.
func (q *Queue) listen(ctx context.Context, listening func(), notified func(payload string)) error {
	conn, err := q.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		pc := pgxConn(dc)
		if pc == nil {
			return fmt.Errorf("queue: LISTEN needs pgx's database/sql driver, not %T", dc)
		}
		if _, err := pc.Exec(ctx, "LISTEN "+pgx.Identifier{notifyChannel(q.lane.Table)}.Sanitize()); err != nil {
			return errors.Join(err, driver.ErrBadConn)
		}
		listening()
		for {
			n, err := pc.WaitForNotification(ctx)
			if err != nil {
				// driver.ErrBadConn: database/sql closes the connection.
				return errors.Join(err, driver.ErrBadConn)
			}
			notified(n.Payload)
		}
	})
}

// pgxConn returns the pgx connection under a database/sql driver
// connection, unwrapping connections that wrap it (Unwrap() driver.Conn),
// or nil.
func pgxConn(dc any) *pgx.Conn {
	for {
		switch c := dc.(type) {
		case *stdlib.Conn:
			return c.Conn()
		case interface{ Unwrap() driver.Conn }:
			dc = c.Unwrap()
		default:
			return nil
		}
	}
}

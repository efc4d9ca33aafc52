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
		err := w.q.listen(ctx, func() {
			retry.reset()
			w.log.Debug("listening for enqueues", "channel", notifyChannel(w.q.lane.Table))
			w.Wake() // for what was enqueued while nobody listened
		}, func(payload string) {
			w.announce(payload)
			w.Wake()
		})
		if ctx.Err() != nil {
			return
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

package queue

import (
	"context"
	"fmt"
	"time"
)

// Throttle connects a lane to send limits that every worker shares
// (package throttle makes one: throttle.Policy.Throttle). The queue calls
// it and decides nothing itself.
type Throttle struct {
	// ScreenFunc is called inside each claim's transaction with the
	// claimed mails' recipients; it returns, for each, how long the mail
	// must wait before it may be sent (0: it may go now). A mail that
	// must wait is given back in the same transaction, due again after
	// its wait and its attempt not used, so that it holds no claim and no
	// worker slot while mail to other domains is sent. nil: no screen.
	ScreenFunc func(ctx context.Context, tx DBTX, addrs []string) ([]time.Duration, error)
	// AcquireFunc is called by a sender just before the send. A wait
	// above 0 (or an error) refuses it: the mail is given back unsent,
	// due again after the wait (or ThrottleRetry). Otherwise release, when
	// not nil, is called once the send returned, with its error.
	AcquireFunc func(ctx context.Context, s ThrottledSend) (release func(sendErr error), wait time.Duration, err error)
}

// ThrottledSend is one send as a Throttle sees it.
type ThrottledSend struct {
	Lane    string
	ID      int64
	Address string // the recipient
	// Holder names this send uniquely: its claim's token and the mail.
	Holder string
}

// ThrottleRetry is when a mail is due again after its Throttle failed.
const ThrottleRetry = time.Second

// throttleClaimed gives back, in the claim's transaction, the claimed
// jobs whose limits have no budget now, and returns the rest.
func (q *Queue) throttleClaimed(ctx context.Context, tx DBTX, ex execer, jobs []*job, token string) ([]*job, error) {
	t := q.lane.Throttle
	if t == nil || t.ScreenFunc == nil || len(jobs) == 0 {
		return jobs, nil
	}
	addrs := make([]string, len(jobs))
	for i, j := range jobs {
		addrs[i] = j.msg.To.Address
	}
	waits, err := t.ScreenFunc(ctx, tx, addrs)
	if err != nil {
		return nil, err
	}
	if len(waits) != len(jobs) {
		return nil, fmt.Errorf("queue: the lane's throttle screened %d of %d mails", len(waits), len(jobs))
	}
	send := jobs[:0:0]
	var ups []rowUpdate
	now := q.clock.Now()
	for i, j := range jobs {
		if waits[i] <= 0 {
			send = append(send, j)
			continue
		}
		ups = append(ups, q.lane.Retry.next(j, event{kind: evReleased, due: now.Add(waits[i]).UnixMilli()}, now))
	}
	if len(ups) == 0 {
		return send, nil
	}
	if _, err := q.writeRows(ctx, ex, ups, "locked_by = ?", token); err != nil {
		return nil, err
	}
	return send, nil
}

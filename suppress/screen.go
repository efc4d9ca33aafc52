package suppress

import (
	"context"
	"fmt"
	"time"

	"github.com/mailspool/mailspool/queue"
)

// Screen returns the hook that connects a lane to the list under p: set it
// as queue.Lane.Screen. It checks the list at enqueue and at each claim
// (unless p.Bypass), and suppresses, in the transaction that records a
// permanent failure, the recipient of a failure about the recipient
// (FromFailure), for as long as p says.
func (l *List) Screen(lane string, p Policy) *queue.Screen {
	s := &queue.Screen{
		Hold:         p.Hold,
		BypassFunc:   l.recordBypass,
		BypassedFunc: l.bypassed,
		FailedFunc: func(ctx context.Context, tx queue.DBTX, failed []queue.Failure) error {
			now := l.now()
			for _, f := range failed {
				reason, ok := FromFailure(f.Err)
				if !ok {
					continue
				}
				e, ok := p.Entry(f.Address, reason, lane, fmt.Sprintf("mail:%s/%d", lane, f.ID), now)
				if !ok {
					continue
				}
				if _, err := l.AddIn(ctx, tx, e); err != nil {
					return err
				}
			}
			return nil
		},
	}
	if !p.Bypass {
		s.CheckFunc = func(ctx context.Context, tx queue.DBTX, addrs []string) (map[string]queue.Suppression, error) {
			found, err := l.Lookup(ctx, tx, lane, addrs)
			if err != nil || len(found) == 0 {
				return nil, err
			}
			out := make(map[string]queue.Suppression, len(found))
			for a, e := range found {
				out[a] = queue.Suppression{Reason: string(e.Reason), Since: e.CreatedAt, Source: e.Source}
			}
			return out, nil
		}
	}
	return s
}

// SetClock replaces the list's clock (tests, the demo).
func (l *List) SetClock(now func() time.Time) { l.now = now }

package suppress

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/transport"
)

// Screen returns the hook that connects a lane to the list under p: set it
// as queue.Lane.Screen. It checks the list at enqueue and at each claim
// (unless p.Bypass), and suppresses, in the transaction that records a
// permanent failure, the recipient of a failure about the recipient
// (FromFailure), for as long as p says.
func (l *List) Screen(lane string, p Policy) *queue.Screen {
	return l.screen(lane, p, nil)
}

// Lists makes a bulk lane's mail belong to lists (package unsubscribe
// makes one), so that a recipient unsubscribed from a list is refused its
// mail and no other.
type Lists struct {
	// PrepareFunc is queue.Screen.PrepareFunc: it returns the message to
	// store and the list it belongs to, given the list the enqueue named.
	PrepareFunc func(m *transport.Message, list string) (*transport.Message, string, error)
	// ListOfFunc returns the list a stored message belongs to ("" none),
	// read from what PrepareFunc made of it.
	ListOfFunc func(m *transport.Message) string
}

// BulkScreen is Screen for a lane whose mail belongs to lists: the mail of
// a list is also checked against the list's scope.
func (l *List) BulkScreen(lane string, p Policy, lists Lists) *queue.Screen {
	return l.screen(lane, p, &lists)
}

// screen is a lane's hook, with its lists (nil: none).
func (l *List) screen(lane string, p Policy, lists *Lists) *queue.Screen {
	s := &laneScreen{l: l, lane: lane, hold: p.Hold, lists: lists}
	out := &queue.Screen{
		BypassFunc: l.recordBypass,
		FailedFunc: func(ctx context.Context, tx queue.DBTX, failed []queue.Failure) error {
			return l.feed(ctx, tx, lane, p, failed)
		},
	}
	if lists != nil {
		out.PrepareFunc = lists.PrepareFunc
	}
	if !p.Bypass {
		out.CheckFunc = s.check
		out.ClaimFunc = s.claim
	}
	return out
}

// feed suppresses the recipients of the failures about them, as p says.
func (l *List) feed(ctx context.Context, tx queue.DBTX, lane string, p Policy, failed []queue.Failure) error {
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
		if _, err := l.LearnIn(ctx, tx, e); err != nil {
			if errors.Is(err, ErrAddress) {
				// An address the list cannot hold cannot be looked up
				// either; failing here would leave the outcomes of the
				// whole batch unwritten, and its mail sent again.
				continue
			}
			return err
		}
	}
	return nil
}

// laneScreen is what a lane checks: its scope, and its lists' scopes.
type laneScreen struct {
	l     *List
	lane  string
	hold  time.Duration // Policy.Hold
	lists *Lists        // nil: the lane has no lists
}

// lookup returns, of addrs, those suppressed for mail of the lane's list
// ("" none), keyed by the address as given.
func (s *laneScreen) lookup(ctx context.Context, tx queue.DBTX, list string, addrs []string) (map[string]Entry, error) {
	if list != "" && s.lists != nil {
		return s.l.LookupScopes(ctx, tx, []string{s.lane, list}, addrs)
	}
	return s.l.Lookup(ctx, tx, s.lane, addrs)
}

// check is queue.Screen.CheckFunc.
func (s *laneScreen) check(ctx context.Context, tx queue.DBTX, to, list string) (*queue.Suppression, error) {
	found, err := s.lookup(ctx, tx, list, []string{to})
	if err != nil {
		return nil, err
	}
	e, ok := found[to]
	if !ok {
		return nil, nil
	}
	sup := suppression(e)
	return &sup, nil
}

// claim is queue.Screen.ClaimFunc: the claimed mails whose recipient is
// suppressed for their list, but for those enqueued past the list
// (queue.BypassSuppression), fail or wait (Policy.Hold).
func (s *laneScreen) claim(ctx context.Context, tx queue.DBTX, lane string, mails []queue.Claimed) (map[int64]queue.Verdict, error) {
	// One lookup per list among the claimed (usually one): a recipient
	// may be unsubscribed from one list and not another.
	lists := make([]string, len(mails))
	byList := map[string][]string{}
	for i, m := range mails {
		if s.lists != nil && s.lists.ListOfFunc != nil {
			lists[i] = s.lists.ListOfFunc(m.Msg)
		}
		byList[lists[i]] = append(byList[lists[i]], m.Msg.To.Address)
	}
	found := map[string]map[string]Entry{}
	var hit []int64
	for list, addrs := range byList {
		f, err := s.lookup(ctx, tx, list, addrs)
		if err != nil {
			return nil, err
		}
		found[list] = f
	}
	for i, m := range mails {
		if _, ok := found[lists[i]][m.Msg.To.Address]; ok {
			hit = append(hit, m.ID)
		}
	}
	if len(hit) == 0 {
		return nil, nil
	}
	bypassed, err := s.l.bypassed(ctx, tx, lane, hit)
	if err != nil {
		return nil, err
	}
	out := map[int64]queue.Verdict{}
	for i, m := range mails {
		e, ok := found[lists[i]][m.Msg.To.Address]
		if ok && !bypassed[m.ID] {
			out[m.ID] = queue.Verdict{Suppression: suppression(e), Hold: s.hold}
		}
	}
	return out, nil
}

// suppression is e as the queue reports it.
func suppression(e Entry) queue.Suppression {
	return queue.Suppression{Reason: string(e.Reason), Since: e.CreatedAt, Source: e.Source}
}

// SetClock replaces the list's clock (tests, the demo).
func (l *List) SetClock(now func() time.Time) { l.now = now }

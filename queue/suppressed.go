package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/mailspool/mailspool/transport"
)

// ErrSuppressed matches the error Enqueue returns when the recipient is on
// the lane's suppression list (errors.Is); the error is a
// *SuppressedError naming the reason and the date.
var ErrSuppressed = errors.New("queue: recipient is suppressed")

// SuppressedError is Enqueue's refusal of a suppressed recipient.
type SuppressedError struct {
	Address string
	Suppression
}

func (e *SuppressedError) Error() string {
	return "queue: recipient " + e.Address + " is suppressed: " + e.Reason + " since " + e.Since.UTC().Format(time.RFC3339)
}

// Is makes errors.Is(err, ErrSuppressed) true.
func (e *SuppressedError) Is(target error) bool { return target == ErrSuppressed }

// Suppression is why an address must not receive a lane's mail: an entry
// of the suppression list, as the queue sees it.
type Suppression struct {
	Reason string    // hard_bounce, complaint, unsubscribe, manual, invalid
	Since  time.Time // when the entry was made
	Source string    // where it came from
}

// Screen connects a lane to a suppression list (package suppress makes
// one: suppress.Policy.Screen). The queue calls it from inside its own
// transactions and decides nothing itself.
type Screen struct {
	// CheckFunc returns, of addrs, those that must not receive the lane's
	// mail, keyed by the address as given. It is called inside the
	// enqueue's transaction (a suppressed recipient is refused with a
	// *SuppressedError) and inside each claim's transaction, so that a
	// mail whose recipient was suppressed while it waited fails with kind
	// "suppressed" instead of being sent. nil: the lane does not check.
	CheckFunc func(ctx context.Context, tx DBTX, addrs []string) (map[string]Suppression, error)
	// FailedFunc is told, inside the transaction that records them, of
	// the mails that failed permanently after a send; it decides from
	// each error (its scope) whether the recipient is to be suppressed.
	// An error from it fails the recording, which the worker retries.
	// nil: nothing is fed.
	FailedFunc func(ctx context.Context, tx DBTX, failed []Failure) error
	// Hold, when positive, makes a mail whose recipient is suppressed at
	// the claim wait instead of failing: it goes back to pending or retry
	// (attempt given back) with last_kind "held", due again Hold later,
	// when the list is checked again; Queue.ReleaseHeld makes it due at
	// once (suppress remove --release). Its not-after deadline still
	// ends it. 0: it fails with kind "suppressed".
	Hold time.Duration
	// PrepareFunc, when not nil, is called at enqueue, before anything is
	// checked or written, with the message (its MessageID set) and the
	// list the enqueue named (List; "" when none). It returns the message
	// to store (a bulk lane's adds its List-Unsubscribe headers) and the
	// list the mail belongs to ("" none), or an error that refuses the
	// enqueue. nil: the lane has no lists, and List is refused.
	PrepareFunc func(m *transport.Message, list string) (*transport.Message, string, error)
	// ListOf returns the list a stored message belongs to ("" none), read
	// from what PrepareFunc made of it, so that the claim checks the list
	// too. CheckListFunc is CheckFunc for mail of a list: it checks the
	// list's scope beside the lane's. Both nil: lists are not checked.
	ListOf        func(m *transport.Message) string
	CheckListFunc func(ctx context.Context, tx DBTX, list string, addrs []string) (map[string]Suppression, error)
	// BypassFunc records, inside the enqueue's transaction and after its
	// row is written, a mail enqueued with BypassSuppression: the audit
	// trail of who sent past the list, and what the claim reads back.
	// BypassedFunc returns which of the lane's mail ids were so enqueued:
	// the claim sends those even when their recipient is suppressed. Both
	// nil: BypassSuppression is refused.
	BypassFunc   func(ctx context.Context, tx DBTX, b Bypass) error
	BypassedFunc func(ctx context.Context, tx DBTX, lane string, ids []int64) (map[int64]bool, error)
}

// Failure is a mail that failed permanently after a send.
type Failure struct {
	Lane    string
	ID      int64
	Address string
	// Err is the send's error; a *transport.Error in its chain carries
	// the verdict's scope.
	Err error
}

// Bypass is one mail enqueued with BypassSuppression.
type Bypass struct {
	Lane    string
	ID      int64
	Address string
	Why     string // as given to BypassSuppression
	// Suppressed is the entry it went past at enqueue; nil when the
	// recipient was not suppressed then (the bypass still holds at the
	// claim).
	Suppressed *Suppression
}

// maxBypassWhy bounds BypassSuppression's reason.
const maxBypassWhy = 255

// BypassSuppression enqueues the mail even if its recipient is on the
// suppression list, and has the claim send it even if the recipient is
// suppressed while it waits: for one mail that must go whatever happened
// before (a password reset to an address that complained). why says who
// and why; it is recorded with the mail id, the address and the entry it
// went past (Screen.BypassFunc: the suppress package's audit trail), in
// the enqueue's transaction. A lane that does not check a list ignores it.
func BypassSuppression(why string) Option {
	return func(o *enqueueOptions) error {
		why = strings.TrimSpace(why)
		switch {
		case why == "":
			return &InvalidError{Reason: "a suppression bypass needs a reason (who and why), for its audit trail"}
		case len(why) > maxBypassWhy:
			return &InvalidError{Reason: fmt.Sprintf("the suppression bypass's reason is %d bytes, at most %d", len(why), maxBypassWhy)}
		case strings.ContainsFunc(why, unicode.IsControl):
			return &InvalidError{Reason: "the suppression bypass's reason has a control character"}
		}
		o.bypass = why
		return nil
	}
}

// kindSuppressed is stored in last_kind of a mail failed at its claim
// because its recipient was suppressed while it waited.
const kindSuppressed = "suppressed"

// KindHeld is stored in last_kind of a mail waiting because its recipient
// was suppressed at its claim, under a Screen that holds (Screen.Hold).
const KindHeld = "held"

// prepare hands m to the lane's PrepareFunc, which knows the lists.
func (q *Queue) prepare(m *transport.Message, o *enqueueOptions) (*transport.Message, error) {
	s := q.lane.Screen
	if s == nil || s.PrepareFunc == nil {
		if o.list != "" {
			return nil, &InvalidError{Reason: "lane " + q.lane.Name + " has no lists (it is not a bulk lane): list " + o.list + " cannot be named"}
		}
		return m, nil
	}
	if m.MessageID == "" {
		c := *m
		c.MessageID = transport.NewMessageID(m.From.Address)
		m = &c
	}
	m, list, err := s.PrepareFunc(m, o.list)
	if err != nil {
		return nil, err
	}
	o.list = list
	return m, nil
}

// check is the Screen's check of addrs, for mail of list ("" none).
func (s *Screen) check(ctx context.Context, tx DBTX, list string, addrs []string) (map[string]Suppression, error) {
	if list != "" && s.CheckListFunc != nil {
		return s.CheckListFunc(ctx, tx, list, addrs)
	}
	return s.CheckFunc(ctx, tx, addrs)
}

// checkEnqueue refuses m's recipient when the lane's Screen says so.
// With o.bypass it refuses nothing and returns the entry the mail goes
// past (nil: none), for recordBypass.
func (q *Queue) checkEnqueue(ctx context.Context, exec DBTX, to string, o *enqueueOptions) (*Suppression, error) {
	s := q.lane.Screen
	if s == nil || s.CheckFunc == nil {
		return nil, nil
	}
	if o.bypass != "" && (s.BypassFunc == nil || s.BypassedFunc == nil) {
		return nil, &InvalidError{Reason: "lane " + q.lane.Name + " cannot record a suppression bypass (its list has no audit trail)"}
	}
	found, err := s.check(ctx, exec, o.list, []string{to})
	if err != nil {
		return nil, err
	}
	sup, ok := found[to]
	switch {
	case !ok:
		return nil, nil
	case o.bypass != "":
		return &sup, nil
	}
	return nil, &SuppressedError{Address: to, Suppression: sup}
}

// recordBypass writes the audit of a mail enqueued with BypassSuppression,
// in the enqueue's transaction.
func (q *Queue) recordBypass(ctx context.Context, exec DBTX, id int64, to string, o *enqueueOptions, sup *Suppression) error {
	s := q.lane.Screen
	if o.bypass == "" || s == nil || s.BypassFunc == nil {
		return nil
	}
	if err := s.BypassFunc(ctx, exec, Bypass{Lane: q.lane.Name, ID: id, Address: to, Why: o.bypass, Suppressed: sup}); err != nil {
		return fmt.Errorf("queue: enqueue: recording the suppression bypass: %w", err)
	}
	return nil
}

// screenClaimed splits claimed jobs into those to send and those whose
// recipient is suppressed, which it fails in the claim's transaction
// (they are marked sending under token already).
func (q *Queue) screenClaimed(ctx context.Context, tx DBTX, ex execer, jobs []*job, token string) ([]*job, error) {
	s := q.lane.Screen
	if s == nil || s.CheckFunc == nil || len(jobs) == 0 {
		return jobs, nil
	}
	// One check per list among the claimed (usually one): a recipient
	// may be unsubscribed from one list and not another.
	lists := make([]string, len(jobs))
	byList := map[string][]string{}
	for i, j := range jobs {
		if s.ListOf != nil {
			lists[i] = s.ListOf(&j.msg)
		}
		byList[lists[i]] = append(byList[lists[i]], j.msg.To.Address)
	}
	found := map[string]map[string]Suppression{}
	hit := false
	for list, addrs := range byList {
		f, err := s.check(ctx, tx, list, addrs)
		if err != nil {
			return jobs, err
		}
		found[list] = f
		hit = hit || len(f) > 0
	}
	if !hit {
		return jobs, nil
	}
	var bypassed map[int64]bool
	if s.BypassedFunc != nil {
		var ids []int64
		for i, j := range jobs {
			if _, ok := found[lists[i]][j.msg.To.Address]; ok {
				ids = append(ids, j.id)
			}
		}
		var err error
		if bypassed, err = s.BypassedFunc(ctx, tx, q.lane.Name, ids); err != nil {
			return jobs, err
		}
	}
	send := jobs[:0:0]
	var ups []rowUpdate
	now := q.clock.Now()
	for i, j := range jobs {
		sup, ok := found[lists[i]][j.msg.To.Address]
		if !ok || bypassed[j.id] {
			send = append(send, j)
			continue
		}
		ev := event{kind: evSuppressed, sup: sup}
		if s.Hold > 0 {
			ev = event{kind: evHeld, sup: sup, due: now.Add(s.Hold).UnixMilli()}
		}
		ups = append(ups, q.lane.Retry.next(j, ev, now))
	}
	if _, err := q.writeRows(ctx, ex, ups, "locked_by = ?", token); err != nil {
		return nil, err
	}
	return send, nil
}

// ReleaseHeld makes the lane's mails held for addr (Screen.Hold) due at
// once, through tx: the transaction that removes addr from the list, so
// that they are released if and only if it commits. Each is checked
// against the list again at its claim, as any mail is: one still
// suppressed (under another entry) is held again. It returns how many it
// released.
func (q *Queue) ReleaseHeld(ctx context.Context, tx DBTX, addr string) (int64, error) {
	cond, args, err := q.where(Filter{To: addr, Kind: KindHeld})
	if err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, q.d.bounded(`UPDATE `+q.table+` SET next_run = ? WHERE status IN (`+strconv.Itoa(StatusPending)+`, `+strconv.Itoa(StatusRetry)+`) AND `+cond),
		append([]any{q.clock.Now().UnixMilli()}, args...)...)
	if err != nil {
		return 0, fmt.Errorf("queue: releasing the mails held for %s: %w", addr, err)
	}
	return res.RowsAffected()
}

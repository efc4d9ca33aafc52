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
// one: suppress.List.Screen). The queue calls it from inside its own
// transactions and does what it answers; the policy (scopes, lists,
// bypasses, holding) is the Screen's.
type Screen struct {
	// PrepareFunc, when not nil, is called at enqueue, before anything is
	// checked or written, with the message (its MessageID set) and the
	// list the enqueue named (List; "" when none). It returns the message
	// to store (a bulk lane's adds its List-Unsubscribe headers) and the
	// list the mail belongs to ("" none), or an error that refuses the
	// enqueue. nil: the lane has no lists, and List is refused.
	PrepareFunc func(m *transport.Message, list string) (*transport.Message, string, error)
	// CheckFunc is called inside the enqueue's transaction, before its
	// rate limits and its row, with the recipient and the mail's list (""
	// none). It returns the entry the recipient is suppressed under, nil
	// when it is not: a suppressed recipient is refused with a
	// *SuppressedError, unless the enqueue bypasses the list. nil: the
	// lane does not check, and BypassSuppression is ignored.
	CheckFunc func(ctx context.Context, tx DBTX, to, list string) (*Suppression, error)
	// BypassFunc records, inside the enqueue's transaction and after its
	// row is written, a mail enqueued with BypassSuppression: the audit
	// trail of who sent past the list, which ClaimFunc reads back. nil:
	// BypassSuppression is refused.
	BypassFunc func(ctx context.Context, tx DBTX, b Bypass) error
	// ClaimFunc is called inside each claim's transaction with the lane's
	// claimed mails. It returns, by id, those that must not be sent
	// because their recipient was suppressed while they waited: each
	// fails with kind "suppressed", or waits (Verdict.Hold). The others
	// are sent. nil: the claim does not check.
	ClaimFunc func(ctx context.Context, tx DBTX, lane string, mails []Claimed) (map[int64]Verdict, error)
	// FailedFunc is told, inside the transaction that records them, of
	// the mails that failed permanently after a send; it decides from
	// each error (its scope) whether the recipient is to be suppressed.
	// An error from it fails the recording, which the worker retries.
	// nil: nothing is fed.
	FailedFunc func(ctx context.Context, tx DBTX, failed []Failure) error
}

// Claimed is a claimed mail, as ClaimFunc is asked about it.
type Claimed struct {
	ID  int64
	Msg *transport.Message
}

// Verdict is ClaimFunc's answer on a claimed mail that is not to be sent.
type Verdict struct {
	Suppression // the entry its recipient is suppressed under
	// Hold, when positive, makes the mail wait instead of failing: it goes
	// back to pending or retry (attempt given back) with last_kind "held",
	// due again Hold later, when the list is checked again;
	// Queue.ReleaseHeld makes it due at once. Its not-after deadline
	// still ends it: it is checked again at the deadline if that comes
	// first, and one held at or after its deadline fails as expired.
	Hold time.Duration
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
// was suppressed at its claim, under a Screen that holds such mail (Verdict.Hold).
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

// checkEnqueue refuses m's recipient when the lane's Screen says so.
// With o.bypass it refuses nothing and returns the entry the mail goes
// past (nil: none), for recordBypass.
func (q *Queue) checkEnqueue(ctx context.Context, exec DBTX, to string, o *enqueueOptions) (*Suppression, error) {
	s := q.lane.Screen
	if s == nil || s.CheckFunc == nil {
		return nil, nil
	}
	if o.bypass != "" && s.BypassFunc == nil {
		return nil, &InvalidError{Reason: "lane " + q.lane.Name + " cannot record a suppression bypass (its list has no audit trail)"}
	}
	sup, err := s.CheckFunc(ctx, exec, to, o.list)
	if err != nil || sup == nil || o.bypass != "" {
		return sup, err
	}
	return nil, &SuppressedError{Address: to, Suppression: *sup}
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

// screenClaimed splits claimed jobs into those to send and those the
// lane's Screen holds back, which it fails or holds in the claim's
// transaction (they are marked sending under token already).
func (q *Queue) screenClaimed(ctx context.Context, tx DBTX, ex execer, jobs []*job, token string) ([]*job, error) {
	s := q.lane.Screen
	if s == nil || s.ClaimFunc == nil || len(jobs) == 0 {
		return jobs, nil
	}
	mails := make([]Claimed, len(jobs))
	for i, j := range jobs {
		mails[i] = Claimed{ID: j.id, Msg: &j.msg}
	}
	held, err := s.ClaimFunc(ctx, tx, q.lane.Name, mails)
	if err != nil || len(held) == 0 {
		return jobs, err
	}
	send := jobs[:0:0]
	var ups []rowUpdate
	now := q.clock.Now()
	for _, j := range jobs {
		v, ok := held[j.id]
		if !ok {
			send = append(send, j)
			continue
		}
		ev := event{kind: evSuppressed, sup: v.Suppression}
		if v.Hold > 0 {
			ev = event{kind: evHeld, sup: v.Suppression, due: now.Add(v.Hold).UnixMilli()}
		}
		ups = append(ups, q.lane.Retry.next(j, ev, now))
	}
	if _, err := q.writeRows(ctx, ex, ups, "locked_by = ?", token); err != nil {
		return nil, err
	}
	return send, nil
}

// ReleaseHeld makes the lane's mails held for addr (Verdict.Hold) due at
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

package queue

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/mailspool/mailspool/internal/textclip"
	"github.com/mailspool/mailspool/transport"
)

// The row state machine: next is the one place that decides what becomes
// of a claimed row. Workers, the rescuer and shutdown all ask it, then
// write its answer with a fenced statement (complete.go).
//
//	event                          condition                          next state
//	─────────────────────────────  ─────────────────────────────────  ──────────────────────────────────────
//	sent      (Send returned nil)                                      sent
//	answered  (Send failed)        permanent                           failed
//	                               temporary, attempts left            retry at Schedule[attempt-1] (≥ RetryAfter)
//	                               temporary, last attempt             failed
//	                               connection, in a run of them        retry, attempt given back (an outage)
//	                               connection, isolated, attempts left retry at ConnectionSchedule
//	                               connection, isolated, last attempt  failed
//	                               the retry would be after NotAfter   failed "expired"
//	late      (claimed after NotAfter)                                 failed "expired", attempt given back
//	suppressed (recipient suppressed while the mail waited, seen at    failed "suppressed", attempt given back
//	           the claim; Lane.Screen)
//	held      (suppressed, seen at the claim, Verdict.Hold set)        pending/retry "held" at now + Hold,
//	                                                                   attempt given back
//	                               now + Hold after NotAfter           ... at NotAfter instead
//	                               NotAfter reached                    failed "expired", attempt given back
//	released  (not sent: shutdown, breaker open, send limits)          pending/retry at once (or when the
//	                                                                   breaker closes, the limits allow),
//	                                                                   attempt given back
//	                               due again after NotAfter            failed "expired", attempt given back
//	unsendable (its stored attachments are missing)                    failed "unsendable", attempt given back
//	rescued   (the lease expired while sending)                        pending/retry at once, attempt given back,
//	                                                                   a crash counted, maybe_delivered set
//	                               crashes reach maxCrashes            failed "poison"
//	                               NotAfter passed                     failed "expired"
//
// Operators act only on rows no worker holds (operate.go): retry takes a
// failed or retry row to pending at once with attempts and crashes at 0 and
// NotAfter dropped; cancel takes a pending or retry row to failed
// "cancelled".
//
// Attempt accounting. The attempts column counts the sends whose outcome
// was recorded, except connection failures during an outage. A claim does
// not change it: job.attempts is the stored count plus the attempt the
// claim stands for, and every event that did not end in an answer from
// the provider (late, released, rescued) writes the stored count back
// unchanged. A lease that expired is counted in crashes instead: the worker
// died or hung, which says nothing about the mail, unless it happens every
// time (maxCrashes), when the mail itself is the likely cause. So a crash
// never fails a MaxAttempts(1) mail, and a mail that kills its worker
// cannot crash-loop the lane.

// maxCrashes is the number of expired leases after which a row fails as
// poison.
const maxCrashes = 3

// Values stored in last_kind besides the transport.Kind names.
const (
	kindExpired = "expired" // failed because its NotAfter deadline passed
	kindPoison  = "poison"  // failed because its lease expired maxCrashes times
	// kindUnsendable: failed unsent because the mail cannot be sent as it
	// was enqueued (its attachments are missing from the files table).
	kindUnsendable = "unsendable"
	// kindSuppressed (suppressed.go): failed at the claim, its recipient suppressed
)

// maxLastError is the size of the last_error column.
const maxLastError = 512

// maxLastRule is the size of the last_rule column.
const maxLastRule = 80

// maxLastScope is the size of the last_scope column: the longest scope
// name ("recipient", "transient") with room for names yet to come.
const maxLastScope = 16

// maxMember is the size of the member column.
const maxMember = 64

// maxProviderID is the size of the provider_id column.
const maxProviderID = 255

// memberName is a composite member's name fit for the member column.
func memberName(name string) string { return asciiColumn(name, maxMember) }

// asciiColumn is s fit for an ASCII column of n bytes: printable ASCII
// (anything else as "?"), at most n bytes. What a transport returns is
// written so (a member's name, a provider's message id): MySQL refuses a
// value too long or not ASCII for such a column, and the refusal would
// fail the outcome write of every mail sent beside it.
func asciiColumn(s string, n int) string {
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			b[i] = '?'
		}
	}
	if len(b) > n {
		b = b[:n]
	}
	return string(b)
}

// job is one claimed row: what a worker sends and the lease it holds.
type job struct {
	id             int64
	nice           int64  // MaxPriority - its priority (as claimed)
	nextRun        int64  // unix ms: when it was due (as claimed)
	token          string // locked_by written by the claim
	attempts       int    // the stored count plus the attempt this lease stands for
	maxAttempts    int
	crashes        int   // leases that expired while sending, before this one
	notAfter       int64 // unix ms, 0 = none
	maybeDelivered bool
	createdAt      int64 // unix ms: enqueued
	files          int   // attachments in the files table, read when the send starts
	msg            transport.Message
}

// dueKey is j's place in the due order, as claimed.
func (j *job) dueKey() dueKey { return dueKey{j.nice, j.nextRun, j.id} }

// rowUpdate is the new state of one row, written by writeRows.
type rowUpdate struct {
	id             int64
	status         int
	attempts       int
	crashes        int
	nextRun        int64 // unix ms
	maybeDelivered bool
	// hasOutcome: lastKind (and, unless sent, lastCode and lastError) are
	// written; otherwise the row keeps the outcome of its last attempt.
	hasOutcome bool
	lastKind   string
	lastCode   int
	lastRule   string // the classification rule that decided the failure
	lastScope  string // what the failure was about (transport.Scope's name)
	lastError  string
	sentAt     int64 // unix ms, 0 unless sent
	providerID string
	// member is the composite transport's member that answered (sent or
	// failed), "" for a plain transport.
	member string
	// failure is set for a permanent failure after a send: what the
	// lane's Screen is told (Screen.FailedFunc).
	failure *Failure
}

// eventKind is what happened to a claimed row.
type eventKind int

const (
	evAnswered   eventKind = iota // the transport returned (send holds the result)
	evLate                        // claimed after its NotAfter deadline: not sent
	evReleased                    // given back unsent (shutdown, breaker open, send limits)
	evRescued                     // its lease expired while sending
	evUnsendable                  // not sent: what it needs is missing from the store
	evSuppressed                  // its recipient is suppressed (seen at the claim): not sent
	evHeld                        // its recipient is suppressed and the lane holds such mail: waits
)

// event is what happened to a claimed row, with what next needs to know.
type event struct {
	kind eventKind
	send sendResult  // evAnswered
	due  int64       // evReleased, evHeld: when the row is due again (unix ms)
	why  string      // evUnsendable: what is missing
	sup  Suppression // evSuppressed, evHeld
}

// sendResult is one Send's result. kind is verdict(err), taken
// once; connStreak is the lane's run of connection failures, this one
// included (0 for any other outcome).
type sendResult struct {
	receipt    transport.Receipt
	err        error
	kind       transport.Kind
	connStreak int
}

// next is the state machine (see the table above).
func (p RetryPolicy) next(j *job, ev event, now time.Time) rowUpdate {
	nowMS := now.UnixMilli()
	stored := j.attempts - 1 // the attempt this lease stood for, given back
	u := rowUpdate{id: j.id, attempts: stored, crashes: j.crashes, maybeDelivered: j.maybeDelivered, nextRun: nowMS}
	again := StatusRetry
	if stored == 0 {
		again = StatusPending
	}
	switch ev.kind {
	case evAnswered:
		return p.outcome(j, ev.send, now)
	case evLate:
		return u.failed(kindExpired, "expired: not sent before the not-after deadline "+time.UnixMilli(j.notAfter).UTC().Format(time.RFC3339))
	case evSuppressed:
		return u.failed(kindSuppressed, "suppressed: the recipient is on the suppression list ("+ev.sup.Reason+" since "+ev.sup.Since.UTC().Format(time.RFC3339)+"); not sent")
	case evHeld:
		listed := "the recipient is on the suppression list (" + ev.sup.Reason + " since " + ev.sup.Since.UTC().Format(time.RFC3339) + ")"
		if j.notAfter != 0 && nowMS >= j.notAfter {
			// Not sent now, it could only be sent after its deadline.
			return u.failed(kindExpired, "expired: held until the not-after deadline "+time.UnixMilli(j.notAfter).UTC().Format(time.RFC3339)+" passed: "+listed+"; not sent")
		}
		// Checked again Hold later, but no later than its deadline: the
		// hold may end sooner (ReleaseHeld), and the check at the deadline
		// expires a mail still held then.
		u.status, u.nextRun = again, max(nowMS, ev.due)
		if j.notAfter != 0 {
			u.nextRun = min(u.nextRun, j.notAfter)
		}
		u.hasOutcome, u.lastKind, u.lastCode, u.lastRule, u.lastScope = true, KindHeld, 0, "", ""
		u.lastError = textclip.Prefix("held: "+listed+"; waits until it is removed, checked again at "+time.UnixMilli(u.nextRun).UTC().Format(time.RFC3339), maxLastError)
		return u
	case evReleased:
		due := max(nowMS, ev.due)
		if j.notAfter != 0 && due > j.notAfter {
			// Nothing makes it due sooner: it cannot be sent in time.
			return u.failed(kindExpired, "expired: given back unsent, due again at "+time.UnixMilli(due).UTC().Format(time.RFC3339)+", after the not-after deadline "+time.UnixMilli(j.notAfter).UTC().Format(time.RFC3339))
		}
		u.status, u.nextRun = again, due
		return u
	case evUnsendable:
		return u.failed(kindUnsendable, "unsendable: "+ev.why)
	case evRescued:
		u.crashes++
		u.maybeDelivered = true // it may have reached the provider before the worker died
		switch {
		case u.crashes >= maxCrashes:
			return u.failed(kindPoison, "poison: the lease expired while sending this mail "+strconv.Itoa(u.crashes)+" times (did the worker crash or hang on it?)")
		case j.notAfter != 0 && nowMS > j.notAfter:
			return u.failed(kindExpired, "expired: the lease expired while sending and the not-after deadline has passed")
		}
		u.status = again
		return u
	}
	panic("queue: unknown event")
}

// failed makes u a failure with kind and text as its outcome.
func (u rowUpdate) failed(kind, text string) rowUpdate {
	u.status, u.hasOutcome, u.lastKind, u.lastCode, u.lastRule, u.lastScope, u.lastError = StatusFailed, true, kind, 0, "", "", textclip.Prefix(text, maxLastError)
	return u
}

// outcome is next for a send the transport returned from: the attempt
// counts, except a connection failure in a run of them.
func (p RetryPolicy) outcome(j *job, r sendResult, now time.Time) rowUpdate {
	u := rowUpdate{id: j.id, attempts: j.attempts, crashes: j.crashes, maybeDelivered: j.maybeDelivered, hasOutcome: true, lastKind: r.kind.String()}
	nowMS := now.UnixMilli()
	if r.err == nil {
		u.status, u.nextRun, u.sentAt, u.providerID = StatusSent, nowMS, nowMS, asciiColumn(r.receipt.MessageID, maxProviderID)
		u.member = memberName(r.receipt.Member)
		return u
	}
	u.member = memberName(transport.MemberOf(r.err))
	u.lastError = lastError(r.err)
	var te *transport.Error
	var retryAfter time.Duration
	u.lastScope = textclip.Prefix(transport.ScopeOf(r.err).String(), maxLastScope)
	if errors.As(r.err, &te) {
		u.lastCode, u.lastRule = te.Code, textclip.Prefix(te.Rule, maxLastRule)
		u.maybeDelivered = u.maybeDelivered || te.MaybeDelivered
		retryAfter = te.RetryAfter
	}
	var wait time.Duration
	switch r.kind {
	case transport.Permanent:
		u.status, u.nextRun = StatusFailed, nowMS
		u.failure = &Failure{ID: j.id, Address: j.msg.To.Address, Err: r.err}
		return u
	case transport.Connection:
		// In a run of connection failures the provider is down: the attempt
		// does not count, so an outage cannot use up every mail's attempts.
		// An isolated one (the lane's previous outcome was an answer) counts,
		// so a mail that makes the provider hang every time cannot retry
		// forever.
		if r.connStreak > 1 {
			u.attempts--
		} else if j.attempts >= j.maxAttempts {
			u.status, u.nextRun = StatusFailed, nowMS
			return u
		}
		wait = withJitter(scheduleAt(p.ConnectionSchedule, r.connStreak-1), p.Jitter)
	default: // Temporary
		if j.attempts >= j.maxAttempts {
			u.status, u.nextRun = StatusFailed, nowMS
			return u
		}
		wait = withJitter(scheduleAt(p.Schedule, j.attempts-1), p.Jitter)
	}
	wait = max(wait, retryAfter)
	u.status, u.nextRun = StatusRetry, now.Add(wait).UnixMilli()
	if j.notAfter != 0 && u.nextRun > j.notAfter {
		u.status, u.nextRun = StatusFailed, nowMS
		u.lastKind = kindExpired
		u.lastError = textclip.Prefix("expired: the next try would be after the not-after deadline; last error: "+u.lastError, maxLastError)
	}
	return u
}

// verdict is the kind the queue acts on for a send that returned err:
// transport.KindOf(err), except that a Permanent failure without evidence
// about the recipient or the message (its scope) is Temporary. Dropping a
// mail at once needs proof that it can never be accepted; a verdict about
// our sender, the lane or the moment is retried on the schedule and fails
// only when its attempts are spent. Adapters built with package classify
// never return such a verdict; this holds the line for any other adapter.
func verdict(err error) transport.Kind {
	kind := transport.KindOf(err)
	if kind == transport.Permanent {
		switch transport.ScopeOf(err) {
		case transport.ScopeRecipient, transport.ScopeMessage:
		default:
			return transport.Temporary
		}
	}
	return kind
}

// lastError makes err's text storable: one line, at most maxLastError bytes.
func lastError(err error) string {
	s := strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' || r == '\t' || r == 0 {
			return ' '
		}
		return r
	}, err.Error())
	return textclip.Prefix(s, maxLastError)
}

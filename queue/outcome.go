package queue

import (
	"errors"
	"strings"
	"time"

	"github.com/mailspool/mailspool/internal/textclip"
	"github.com/mailspool/mailspool/transport"
)

// kindExpired is stored in last_kind for mail failed because its NotAfter
// deadline passed; the other values are transport.Kind names.
const kindExpired = "expired"

// maxLastError is the size of the last_error column.
const maxLastError = 512

// job is one claimed row: what a worker sends and the lease it holds.
type job struct {
	id             int64
	token          string // locked_by written by the claim
	attempts       int    // including the attempt this claim stands for
	maxAttempts    int
	notAfter       int64 // unix ms, 0 = none
	maybeDelivered bool
	msg            transport.Message
}

// rowUpdate is the new state of one row, written by complete.
type rowUpdate struct {
	id             int64
	status         int
	attempts       int
	nextRun        int64 // unix ms
	sentAt         int64 // unix ms, 0 unless sent
	lastKind       string
	lastCode       int
	lastError      string
	providerID     string
	maybeDelivered bool
}

// outcome is the one place that maps a send result to the row's next
// state. connStreak is the number of connection failures in a row the lane
// has seen, this one included: it picks the ConnectionSchedule entry, and
// from the second one on the attempt is given back.
func (p RetryPolicy) outcome(j *job, receipt transport.Receipt, err error, now time.Time, connStreak int) rowUpdate {
	u := rowUpdate{id: j.id, attempts: j.attempts, maybeDelivered: j.maybeDelivered, lastKind: transport.KindOf(err).String()}
	nowMS := now.UnixMilli()
	if err == nil {
		u.status, u.nextRun, u.sentAt, u.providerID = StatusSent, nowMS, nowMS, receipt.MessageID
		return u
	}
	u.lastError = lastError(err)
	var te *transport.Error
	var retryAfter time.Duration
	if errors.As(err, &te) {
		u.lastCode = te.Code
		u.maybeDelivered = u.maybeDelivered || te.MaybeDelivered
		retryAfter = te.RetryAfter
	}
	var wait time.Duration
	switch transport.KindOf(err) {
	case transport.Permanent:
		u.status, u.nextRun = StatusFailed, nowMS
		return u
	case transport.Connection:
		// In a run of connection failures the provider is down: the attempt
		// does not count, so an outage cannot use up every mail's attempts.
		// An isolated one (the lane's previous outcome was an answer) counts,
		// so a mail that makes the provider hang every time cannot retry
		// forever.
		if connStreak > 1 {
			u.attempts--
		} else if j.attempts >= j.maxAttempts {
			u.status, u.nextRun = StatusFailed, nowMS
			return u
		}
		wait = withJitter(pick(p.ConnectionSchedule, connStreak-1), p.Jitter)
	default: // Temporary
		if j.attempts >= j.maxAttempts {
			u.status, u.nextRun = StatusFailed, nowMS
			return u
		}
		wait = withJitter(pick(p.Schedule, j.attempts-1), p.Jitter)
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

// expired is the state of a claimed row whose NotAfter passed before it
// could be sent.
func expired(j *job, now time.Time) rowUpdate {
	return rowUpdate{
		id: j.id, status: StatusFailed, attempts: j.attempts - 1, nextRun: now.UnixMilli(),
		lastKind: kindExpired, lastError: "expired: not sent before the not-after deadline " + time.UnixMilli(j.notAfter).UTC().Format(time.RFC3339),
		maybeDelivered: j.maybeDelivered,
	}
}

// abandoned is the state of a claimed row that has been claimed more often
// than its attempts allow: its earlier leases expired while sending, which
// means the worker died on it (or hung) each time.
func abandoned(j *job, now time.Time) rowUpdate {
	return rowUpdate{
		id: j.id, status: StatusFailed, attempts: j.attempts - 1, nextRun: now.UnixMilli(),
		lastKind: transport.Temporary.String(), lastError: "abandoned: the lease expired during every attempt (did the worker crash or hang on this mail?)",
		maybeDelivered: true,
	}
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

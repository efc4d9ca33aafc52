package queue

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mailspool/mailspool/internal/textclip"
	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func defaultPolicy(t *testing.T) RetryPolicy {
	t.Helper()
	p, err := RetryPolicy{}.withDefaults()
	require.NoError(t, err)
	return p
}

// answered is the state machine's answer for a send that returned err.
func answered(p RetryPolicy, j *job, receipt transport.Receipt, err error, now time.Time, streak int) rowUpdate {
	return p.next(j, event{kind: evAnswered, send: sendResult{receipt: receipt, err: err, kind: verdict(err), connStreak: streak}}, now)
}

func TestOutcomeTemporaryFollowsTheScheduleWithJitter(t *testing.T) {
	p := defaultPolicy(t)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	temp := &transport.Error{Kind: transport.Temporary, Code: 451, Enhanced: "4.3.0"}
	want := []time.Duration{2 * time.Minute, 10 * time.Minute, 30 * time.Minute, 2 * time.Hour}
	for attempt := 1; attempt <= 4; attempt++ {
		var lo, hi time.Duration = 1 << 62, 0
		for range 2000 {
			u := answered(p, &job{attempts: attempt, maxAttempts: 5}, transport.Receipt{}, temp, now, 0)
			require.Equal(t, StatusRetry, u.status)
			require.Equal(t, attempt, u.attempts)
			wait := time.Duration(u.nextRun-now.UnixMilli()) * time.Millisecond
			lo, hi = min(lo, wait), max(hi, wait)
		}
		base := want[attempt-1]
		assert.GreaterOrEqual(t, lo, base, "attempt %d", attempt)
		assert.LessOrEqual(t, hi, base+base/5, "attempt %d: jitter at most 20%%", attempt)
		assert.Greater(t, hi-lo, base/10, "attempt %d: the jitter spreads retries", attempt)
	}
	u := answered(p, &job{attempts: 5, maxAttempts: 5}, transport.Receipt{}, temp, now, 0)
	assert.Equal(t, StatusFailed, u.status, "out of attempts")
	assert.Equal(t, "temporary", u.lastKind)
	u = answered(p, &job{attempts: 1, maxAttempts: 1}, transport.Receipt{}, temp, now, 0)
	assert.Equal(t, StatusFailed, u.status, "single-attempt mail is not retried")
}

func TestOutcomePermanentIsNeverRetried(t *testing.T) {
	p := defaultPolicy(t)
	now := time.Now()
	for _, err := range []error{
		&transport.Error{Kind: transport.Permanent, Scope: transport.ScopeRecipient, Code: 550, Enhanced: "5.1.1"},
		fmt.Errorf("wrapped: %w", &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeMessage, Code: 554}),
	} {
		u := answered(p, &job{attempts: 1, maxAttempts: 5}, transport.Receipt{}, err, now, 0)
		assert.Equal(t, StatusFailed, u.status)
		assert.Equal(t, "permanent", u.lastKind)
		assert.Equal(t, now.UnixMilli(), u.nextRun, "finished now")
	}
}

// A Permanent verdict without evidence about the recipient or the message
// (an adapter that did not classify through package classify) is retried
// on the schedule, never failed at once.
func TestOutcomePermanentWithoutEvidenceIsRetried(t *testing.T) {
	p := defaultPolicy(t)
	now := time.Now()
	for _, scope := range []transport.Scope{transport.ScopeTransient, transport.ScopeSender, transport.ScopeLane} {
		err := fmt.Errorf("wrapped: %w", &transport.Error{Kind: transport.Permanent, Scope: scope, Code: 554, Enhanced: "5.7.1"})
		u := answered(p, &job{attempts: 1, maxAttempts: 5}, transport.Receipt{}, err, now, 0)
		assert.Equal(t, StatusRetry, u.status, "scope %s", scope)
		assert.Equal(t, "temporary", u.lastKind, "scope %s", scope)
		assert.Equal(t, scope.String(), u.lastScope)
		u = answered(p, &job{attempts: 5, maxAttempts: 5}, transport.Receipt{}, err, now, 0)
		assert.Equal(t, StatusFailed, u.status, "scope %s: failed once its attempts are spent", scope)
	}
}

func TestOutcomeRetryAfterAndMaybeDelivered(t *testing.T) {
	p := defaultPolicy(t)
	now := time.Now()
	u := answered(p, &job{attempts: 1, maxAttempts: 5}, transport.Receipt{},
		&transport.Error{Kind: transport.Temporary, Code: 429, RetryAfter: 90 * time.Minute}, now, 0)
	assert.Equal(t, now.Add(90*time.Minute).UnixMilli(), u.nextRun)
	assert.Equal(t, 429, u.lastCode)

	u = answered(p, &job{attempts: 3, maxAttempts: 5}, transport.Receipt{},
		&transport.Error{Kind: transport.Temporary, RetryAfter: time.Second}, now, 0)
	assert.GreaterOrEqual(t, u.nextRun, now.Add(30*time.Minute).UnixMilli(), "a short hint does not shorten the schedule")

	u = answered(p, &job{attempts: 1, maxAttempts: 5}, transport.Receipt{},
		&transport.Error{Kind: transport.Temporary, MaybeDelivered: true, Err: errors.New("EOF after DATA")}, now, 0)
	assert.True(t, u.maybeDelivered)
	u = answered(p, &job{attempts: 2, maxAttempts: 5, maybeDelivered: true}, transport.Receipt{MessageID: "x"}, nil, now, 0)
	assert.True(t, u.maybeDelivered, "the flag stays once set")
	assert.Equal(t, StatusSent, u.status)
}

func TestOutcomeConnectionSpendsNoAttemptInAnOutage(t *testing.T) {
	p := defaultPolicy(t)
	now := time.Now()
	conn := &transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane, Detail: "connection refused"}
	for streak, base := range []time.Duration{5 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 2 * time.Hour} {
		u := answered(p, &job{attempts: 4, maxAttempts: 5}, transport.Receipt{}, conn, now, streak+1)
		require.Equal(t, StatusRetry, u.status)
		wait := time.Duration(u.nextRun-now.UnixMilli()) * time.Millisecond
		assert.GreaterOrEqual(t, wait, base)
		assert.LessOrEqual(t, wait, base+base/5)
		if streak == 0 {
			assert.Equal(t, 4, u.attempts, "an isolated connection failure counts")
		} else {
			assert.Equal(t, 3, u.attempts, "in a run of them the attempt is given back")
		}
	}
	u := answered(p, &job{attempts: 5, maxAttempts: 5}, transport.Receipt{}, conn, now, 3)
	assert.Equal(t, StatusRetry, u.status, "an outage never fails a mail, even on its last attempt")
	u = answered(p, &job{attempts: 5, maxAttempts: 5}, transport.Receipt{}, conn, now, 1)
	assert.Equal(t, StatusFailed, u.status, "a mail that alone keeps failing to connect runs out of attempts")
	assert.Equal(t, "connection", u.lastKind)
}

func TestOutcomeExpiry(t *testing.T) {
	p := defaultPolicy(t)
	now := time.Now()
	j := &job{attempts: 1, maxAttempts: 5, notAfter: now.Add(time.Minute).UnixMilli()}
	u := answered(p, j, transport.Receipt{}, &transport.Error{Kind: transport.Temporary, Code: 421}, now, 0)
	assert.Equal(t, StatusFailed, u.status, "the next try (2m) would be after the deadline (1m)")
	assert.Equal(t, kindExpired, u.lastKind)
	assert.Contains(t, u.lastError, "421")

	u = p.next(&job{attempts: 1, notAfter: now.Add(-time.Second).UnixMilli()}, event{kind: evLate}, now)
	assert.Equal(t, StatusFailed, u.status)
	assert.Equal(t, 0, u.attempts, "never tried")
}

func TestLastErrorIsOneShortLine(t *testing.T) {
	long := fmt.Errorf("550 5.1.1 %s\r\nsecond line", string(make([]byte, 600)))
	s := lastError(long)
	assert.LessOrEqual(t, len(s), maxLastError)
	assert.NotContains(t, s, "\n")
	assert.NotContains(t, s, "\x00")
	assert.Equal(t, "é", textclip.Prefix("éé", 3), "cut on a rune boundary")
}

// TestRescueHonoursNotAfter: a row whose lease expired while sending goes
// back to be sent while its not-after deadline is still ahead, and fails as
// expired once the deadline has passed; either way the attempt is given
// back and a crash counted.
func TestRescueHonoursNotAfter(t *testing.T) {
	p := defaultPolicy(t)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	rescued := func(notAfter time.Time) rowUpdate {
		return p.next(&job{id: 7, attempts: 2, maxAttempts: 5, notAfter: notAfter.UnixMilli()}, event{kind: evRescued}, now)
	}

	u := rescued(now.Add(time.Hour))
	assert.Equal(t, StatusRetry, u.status, "the deadline is an hour away: sent again")
	assert.Equal(t, now.UnixMilli(), u.nextRun, "due at once")
	assert.False(t, u.hasOutcome)

	u = rescued(now.Add(time.Millisecond))
	assert.Equal(t, StatusRetry, u.status, "the deadline has not passed yet")

	for _, past := range []time.Time{now.Add(-time.Millisecond), now.Add(-time.Hour)} {
		u = rescued(past)
		assert.Equal(t, StatusFailed, u.status, "the deadline has passed: not sent again")
		assert.Equal(t, kindExpired, u.lastKind)
		assert.Contains(t, u.lastError, "not-after deadline has passed")
	}
	for _, u := range []rowUpdate{rescued(now.Add(time.Hour)), rescued(now.Add(-time.Hour))} {
		assert.Equal(t, 1, u.attempts, "the attempt is given back")
		assert.Equal(t, 1, u.crashes, "a crash is counted")
		assert.True(t, u.maybeDelivered)
	}

	u = p.next(&job{attempts: 1, maxAttempts: 5}, event{kind: evRescued}, now)
	assert.Equal(t, StatusPending, u.status, "no deadline: sent again")
}

// TestReleasedRowIsDueWhenItWasGivenBackFor: a row given back unsent
// keeps its attempt and is due again at the time the release names (the
// breaker's end), never sooner, or at once when that time has passed.
func TestReleasedRowIsDueWhenItWasGivenBackFor(t *testing.T) {
	p := defaultPolicy(t)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	breakerEnd := now.Add(4 * time.Minute)
	u := p.next(&job{attempts: 1, maxAttempts: 5}, event{kind: evReleased, due: breakerEnd.UnixMilli()}, now)
	assert.Equal(t, StatusPending, u.status)
	assert.Equal(t, breakerEnd.UnixMilli(), u.nextRun, "due when the breaker closes")
	assert.Equal(t, 0, u.attempts, "the attempt is given back")
	assert.False(t, u.hasOutcome, "the last outcome stays")

	u = p.next(&job{attempts: 3, maxAttempts: 5}, event{kind: evReleased, due: now.Add(-time.Minute).UnixMilli()}, now)
	assert.Equal(t, StatusRetry, u.status)
	assert.Equal(t, now.UnixMilli(), u.nextRun, "due at once")
	assert.Equal(t, 2, u.attempts)
}

// TestHeldMailIsCheckedAgainNoLaterThanItsDeadline: a held mail is due
// again Hold later, or at its not-after deadline when that comes first
// (it may still be released before: ReleaseHeld), and fails as expired,
// its attempt given back, when it is held at or after its deadline.
func TestHeldMailIsCheckedAgainNoLaterThanItsDeadline(t *testing.T) {
	p := defaultPolicy(t)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	sup := Suppression{Reason: "complaint", Since: now.Add(-time.Hour)}
	held := func(attempts int, notAfter time.Time) rowUpdate {
		j := &job{id: 7, attempts: attempts, maxAttempts: 5}
		if !notAfter.IsZero() {
			j.notAfter = notAfter.UnixMilli()
		}
		return p.next(j, event{kind: evHeld, sup: sup, due: now.Add(time.Hour).UnixMilli()}, now)
	}

	u := held(1, time.Time{})
	assert.Equal(t, StatusPending, u.status)
	assert.Equal(t, now.Add(time.Hour).UnixMilli(), u.nextRun, "no deadline: checked again Hold later")
	assert.Equal(t, KindHeld, u.lastKind)

	u = held(1, now.Add(2*time.Hour))
	assert.Equal(t, now.Add(time.Hour).UnixMilli(), u.nextRun, "the deadline is after the hold")

	u = held(3, now.Add(30*time.Minute))
	assert.Equal(t, StatusRetry, u.status)
	assert.Equal(t, KindHeld, u.lastKind, "held while its deadline is ahead")
	assert.Equal(t, now.Add(30*time.Minute).UnixMilli(), u.nextRun, "checked again at its deadline")
	assert.Contains(t, u.lastError, "checked again at 2026-12-02T10:30:00Z")
	assert.Equal(t, 2, u.attempts, "the attempt is given back")

	for _, deadline := range []time.Time{now, now.Add(-time.Millisecond), now.Add(-3 * time.Hour)} {
		u = held(3, deadline)
		assert.Equal(t, StatusFailed, u.status, "deadline %v: it could only be sent after it", deadline)
		assert.Equal(t, kindExpired, u.lastKind)
		assert.Contains(t, u.lastError, "complaint")
		assert.Equal(t, now.UnixMilli(), u.nextRun, "finished now")
		assert.Equal(t, 2, u.attempts, "the attempt is given back")
	}
}

// TestReleasedMailDueAfterItsDeadlineExpires: a mail given back unsent
// (send limits, an open breaker) that would be due again only after its
// not-after deadline fails now as expired, as a retry after the deadline
// does, instead of waiting past its deadline (or, given back at every
// claim by a throttle, for ever).
func TestReleasedMailDueAfterItsDeadlineExpires(t *testing.T) {
	p := defaultPolicy(t)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	released := func(due, notAfter time.Time) rowUpdate {
		return p.next(&job{id: 7, attempts: 2, maxAttempts: 5, notAfter: notAfter.UnixMilli()}, event{kind: evReleased, due: due.UnixMilli()}, now)
	}

	u := released(now.Add(4*time.Minute), now.Add(time.Hour))
	assert.Equal(t, StatusRetry, u.status, "due before its deadline")
	assert.Equal(t, now.Add(4*time.Minute).UnixMilli(), u.nextRun)
	assert.False(t, u.hasOutcome)

	u = released(now.Add(time.Hour), now.Add(time.Hour))
	assert.Equal(t, StatusRetry, u.status, "due at its deadline: it may still be sent")

	u = released(now.Add(time.Hour+time.Millisecond), now.Add(time.Hour))
	assert.Equal(t, StatusFailed, u.status, "due only after its deadline")
	assert.Equal(t, kindExpired, u.lastKind)
	assert.Contains(t, u.lastError, "not-after deadline 2026-12-02T11:00:00Z")
	assert.Equal(t, now.UnixMilli(), u.nextRun, "finished now")
	assert.Equal(t, 1, u.attempts, "the attempt is given back")

	u = released(now, now.Add(-time.Second))
	assert.Equal(t, StatusFailed, u.status, "given back at once, but the deadline has passed")
	assert.Equal(t, kindExpired, u.lastKind)
}

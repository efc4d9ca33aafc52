package queue

import (
	"strings"
	"time"
)

// Observer receives a worker's events, for metrics, health checks and
// alerts: set WorkerOptions.Observer. Every field is optional; a nil
// field is not called. The functions are called synchronously from the
// worker's goroutines, possibly concurrently: they must be safe for
// concurrent use and return quickly (no I/O). Every event names its lane,
// so one Observer may serve several workers.
//
// Events carry no message content and no full address: what they hold is
// safe to log and to count.
type Observer struct {
	// ClaimFunc is called after every turn of the claim loop, including
	// turns that found nothing to do, claims that failed, and turns that
	// did not claim because an operator paused the lane.
	ClaimFunc func(ClaimEvent)
	// OutcomeFunc is called once per row whose next state the worker
	// decided: after each send, and for rows settled without one (expired,
	// out of attempts).
	OutcomeFunc func(OutcomeEvent)
	// RescueFunc is called when rows whose lease had expired (their worker
	// died or hung) were made claimable again.
	RescueFunc func(RescueEvent)
	// FencedFunc is called when outcomes were not written because another
	// worker had taken the rows' lease over.
	FencedFunc func(FencedEvent)
	// DeadlockFunc is called when the database reported a deadlock or a
	// lock wait timeout and the statement was retried.
	DeadlockFunc func(DeadlockEvent)
	// BreakerFunc is called when the lane's breaker opens (claiming pauses
	// after connection failures in a row) and when it closes again.
	BreakerFunc func(BreakerEvent)
	// PauseFunc is called when the claim loop first reads its lane's
	// operator pause, and each time it finds it changed.
	PauseFunc func(PauseEvent)
	// CleanupFunc is called after each timed cleanup run.
	CleanupFunc func(CleanupEvent)
}

// ClaimEvent is one turn of the claim loop.
type ClaimEvent struct {
	Lane string
	Rows int   // rows claimed (0: nothing was due, Err, or Paused)
	Err  error // the claim failed; already logged by the worker
	// Paused: an operator paused the lane (Queue.Pause), so the loop
	// turned without claiming.
	Paused bool
}

// PauseEvent: the claim loop found its lane paused by an operator, or no
// longer paused (Queue.Pause, Queue.Resume), and at its first look.
type PauseEvent struct {
	Lane   string
	Paused bool
	Since  time.Time // when it was paused
	Reason string
}

// OutcomeEvent is the decided next state of one row.
type OutcomeEvent struct {
	Lane string
	ID   int64
	// Status is the row's next state: StatusSent, StatusRetry or
	// StatusFailed.
	Status int
	// Kind is the transport.Kind name of the send's result ("sent",
	// "temporary", "permanent", "connection"), or "expired" / "abandoned"
	// for a row settled without a send.
	Kind string
	// Code and Enhanced are the provider's reply code (SMTP code or HTTP
	// status) and RFC 3463 enhanced code, when it gave them.
	Code     int
	Enhanced string
	// Scope is what a failed send was about ("recipient", "message",
	// "sender", "transient", "lane"; transport.Scope's name), "" when
	// sent or settled without a send.
	Scope string
	// Rule is the classification rule that decided a failed send.
	Rule string
	// Domain is the recipient's domain, lower case; never the address.
	Domain string
	// ProviderID is the provider's message id of a sent mail.
	ProviderID string
	// Attempts is the row's attempts, this one included.
	Attempts int
	// Sent reports whether a send was made (false for expired and
	// abandoned rows); SendDuration is how long it took.
	Sent         bool
	SendDuration time.Duration
	// Enqueued is when the row was enqueued: with Status StatusSent,
	// time.Since(Enqueued) is the mail's enqueue-to-sent latency.
	Enqueued time.Time
	// Error is the short, secret-free text stored in last_error ("" when
	// sent).
	Error string
}

// RescueEvent reports rows returned from an expired lease.
type RescueEvent struct {
	Lane string
	Rows int
}

// FencedEvent reports outcomes rejected by the completion's fence.
type FencedEvent struct {
	Lane string
	Rows int
}

// DeadlockEvent reports one deadlock (or lock wait timeout) that was
// retried.
type DeadlockEvent struct {
	Lane string
	// Op names the statement: "claim", "complete", "rescue", ...
	Op string
}

// BreakerEvent reports the lane's breaker opening or closing.
type BreakerEvent struct {
	Lane string
	Open bool
	// Until is when claiming resumes (with a single probe) while Open.
	Until time.Time
}

// CleanupEvent reports one timed cleanup run.
type CleanupEvent struct {
	Lane    string
	Deleted int64
	Err     error
}

// JoinObservers returns an Observer that calls each of obs in turn (nil
// entries are skipped), for a worker watched by metrics and a health check
// at once.
func JoinObservers(obs ...*Observer) *Observer {
	var list []*Observer
	for _, o := range obs {
		if o != nil {
			list = append(list, o)
		}
	}
	each := func(f func(*Observer)) {
		for _, o := range list {
			f(o)
		}
	}
	return &Observer{
		ClaimFunc: func(e ClaimEvent) {
			each(func(o *Observer) { call(o.ClaimFunc, e) })
		},
		OutcomeFunc: func(e OutcomeEvent) {
			each(func(o *Observer) { call(o.OutcomeFunc, e) })
		},
		RescueFunc: func(e RescueEvent) {
			each(func(o *Observer) { call(o.RescueFunc, e) })
		},
		FencedFunc: func(e FencedEvent) {
			each(func(o *Observer) { call(o.FencedFunc, e) })
		},
		DeadlockFunc: func(e DeadlockEvent) {
			each(func(o *Observer) { call(o.DeadlockFunc, e) })
		},
		BreakerFunc: func(e BreakerEvent) {
			each(func(o *Observer) { call(o.BreakerFunc, e) })
		},
		PauseFunc: func(e PauseEvent) {
			each(func(o *Observer) { call(o.PauseFunc, e) })
		},
		CleanupFunc: func(e CleanupEvent) {
			each(func(o *Observer) { call(o.CleanupFunc, e) })
		},
	}
}

// call calls f with e unless f is nil.
func call[E any](f func(E), e E) {
	if f != nil {
		f(e)
	}
}

// domainOf returns the lower-case domain of an address, "" when it has
// none: what logs and events may say about a recipient.
func domainOf(addr string) string {
	at := strings.LastIndexByte(addr, '@')
	if at < 0 {
		return ""
	}
	return strings.ToLower(addr[at+1:])
}

// ClaimInterval is the longest a worker with these options may go between
// two ClaimEvents while it works normally: a turn waits while two batches
// are out, and a batch is out while its rows start (the rows not started
// within 2 s are given back) and its sends run (up to SendTimeout) and,
// when the database fails, while its outcomes are retried (up to
// FailAfter, when Run gives up by itself); a failing claim backs off up to
// 30 s. A breaker pause (BreakerEvent) comes on top.
// Health checks use it as their bound: a claim loop silent for longer is
// wedged.
func (o WorkerOptions) ClaimInterval() time.Duration {
	_ = o.setDefaults() // o is a copy; a bad value is NewWorker's to report
	return max(2*(startWait+o.SendTimeout), o.FailAfter) + maxClaimBackoff + o.PollInterval
}

package queue

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/mailspool/mailspool/transport"
)

// noObserver stands in for a nil WorkerOptions.Observer.
var noObserver = &Observer{}

// observer returns the worker's Observer, never nil.
func (w *Worker) observer() *Observer {
	if w.opts.Observer != nil {
		return w.opts.Observer
	}
	return noObserver
}

// observeOutcome logs a row's decided state and tells the Observer: a line
// at info for every mail not sent (the answer an operator looks for when a
// user says a mail never came), at debug for a sent one. kind is the send's
// transport.Kind name, or "expired" / "abandoned" when sent is false. The
// line names the recipient's domain, never the address.
func (w *Worker) observeOutcome(j *job, u rowUpdate, kind string, sendErr error, sent bool, took time.Duration) {
	ev := OutcomeEvent{
		Lane: w.q.lane.Name, ID: j.id, Status: u.status, Kind: kind, Code: u.lastCode, Scope: u.lastScope, Rule: u.lastRule,
		Domain: domainOf(j.msg.To.Address), ProviderID: u.providerID, Attempts: u.attempts,
		Sent: sent, SendDuration: took, Error: redactAddresses(u.lastError),
	}
	if j.createdAt > 0 {
		ev.Enqueued = time.UnixMilli(j.createdAt)
	}
	var te *transport.Error
	if errors.As(sendErr, &te) {
		ev.Enhanced = te.Enhanced
	}
	// The line's attributes are built only when it will be written: at the
	// default level a sent mail logs nothing, and costs nothing here.
	level := slog.LevelInfo
	if ev.Status == StatusSent {
		level = slog.LevelDebug
	}
	if w.log.Enabled(context.Background(), level) {
		attrs := []any{"id", ev.ID, "kind", ev.Kind, "status", StatusName(ev.Status), "attempts", ev.Attempts, "domain", ev.Domain}
		if ev.Status == StatusSent {
			w.log.Debug("mail sent", append(attrs, "provider_id", ev.ProviderID, "took", took)...)
		} else {
			w.log.Info("mail not sent", append(attrs, "code", ev.Code, "enhanced", ev.Enhanced, "scope", ev.Scope, "rule", ev.Rule, "provider_id", ev.ProviderID,
				"maybe_delivered", u.maybeDelivered, "error", ev.Error)...)
		}
	}
	call(w.observer().OutcomeFunc, ev)
}

// statementOf names the statements whose failures h counts, for a
// DeadlockEvent.
func (w *Worker) statementOf(h *health) string {
	switch h {
	case &w.claims:
		return "claim"
	case &w.writes:
		return "complete"
	case &w.renewals:
		return "heartbeat"
	}
	return "rescue"
}

// anAddress is an email address as it may appear in a provider's reply.
var anAddress = regexp.MustCompile(`[^\s<>"'(),;:\[\]]+@([A-Za-z0-9.-]+[A-Za-z0-9])`)

// redactAddresses replaces the local part of every address in s by "*",
// keeping the domain: "550 5.1.1 <bob@example.com>: no such user" becomes
// "550 5.1.1 <*@example.com>: no such user".
func redactAddresses(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	return anAddress.ReplaceAllString(s, "*@$1")
}

package conformance

import (
	"testing"

	"github.com/mailspool/mailspool/transport"
)

// scenarioCase sends one message in scenario sc and checks the outcome and
// that at most one attempt reached the wire.
func scenarioCase(t *testing.T, e *env, sc Scenario) {
	if sc == Accept {
		acceptCase(t, e)
		return
	}
	want := expected[sc]
	tr := e.open(t, sc)
	_, err := e.send(t, tr, testMessage(string(sc)), want.deadline)
	for _, d := range checkOutcome(err, want) {
		e.errorf(t, "%s", d)
	}
	if n := e.h.Attempts(); n > 1 {
		e.errorf(t, "Attempts() = %d after one Send, want at most 1: adapters never retry", n)
	}
	if sc == TLSFailure {
		// An adapter that falls back to plain text would deliver here.
		if rs, ok := e.received(t); ok && len(rs) != 0 {
			e.errorf(t, "the backend received %d mails although TLS failed, want none", len(rs))
		}
	}
}

// acceptCase: Sent, a non-empty Receipt.MessageID, one attempt, one mail.
func acceptCase(t *testing.T, e *env) {
	tr := e.open(t, Accept)
	m := testMessage(string(Accept))
	r, err := e.send(t, tr, m, 0)
	if err != nil {
		e.fatalf(t, "Send: %v (kind %s), want Sent", err, transport.KindOf(err))
	}
	if r.MessageID == "" {
		e.errorf(t, "Receipt.MessageID is empty, want the provider's id")
	}
	if n := e.h.Attempts(); n != 1 {
		e.errorf(t, "Attempts() = %d after one Send, want 1", n)
	}
	if rs, ok := e.received(t); ok {
		if len(rs) != 1 {
			e.fatalf(t, "the backend received %d mails, want 1", len(rs))
		}
		if len(rs[0].To) != 1 || rs[0].To[0] != m.To.Address {
			e.errorf(t, "the backend received a mail for %q, want [%q]", rs[0].To, m.To.Address)
		}
	}
}

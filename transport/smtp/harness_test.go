package smtp_test

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/mailspool/mailspool/conformance"
	"github.com/mailspool/mailspool/transport"
)

func newHarness(_ context.Context, t *testing.T) (conformance.Harness, error) {
	return &harness{t: t}, nil
}

// harness drives the go-smtp test server through the conformance
// scenarios: STARTTLS with a CA file and AUTH PLAIN throughout, so every
// scenario also exercises TLS and the password.
type harness struct {
	t *testing.T
	s *server // nil until Open, and for Refused
}

// scenarioScripts maps each SMTP scenario to the stage where a real server
// gives its reply.
var scenarioScripts = map[conformance.Scenario]stage{
	conformance.SMTP421: atMail,
	conformance.SMTP450: atRcpt,
	conformance.SMTP451: afterData,
	conformance.SMTP452: atRcpt,
	conformance.SMTP550: atRcpt,
	conformance.SMTP552: afterData,
	conformance.SMTP553: atRcpt,
	conformance.SMTP554: afterData,
}

func (h *harness) Open(_ context.Context, sc conformance.Scenario) (transport.Transport, error) {
	scr := script{auth: []string{"PLAIN"}}
	switch sc {
	case conformance.Accept:
	case conformance.Hang:
		scr.at = map[stage]action{atGreeting: {hang: true}}
	case conformance.TLSFailure:
		scr.tls = untrustedTLS
	case conformance.StallAfterData:
		scr.at = map[stage]action{afterData: {hang: true}}
	case conformance.Refused:
		return h.refused()
	default:
		st, ok := scenarioScripts[sc]
		if !ok {
			return nil, fmt.Errorf("%w: SMTP has no HTTP statuses (%s)", conformance.ErrUnsupported, sc)
		}
		scr.at = map[stage]action{st: {reply: sc.Reply()}}
	}
	h.s = startServer(h.t, scr)
	return open(h.t, h.s.url("")), nil
}

// refused opens a transport to a port where nothing listens any more.
func (h *harness) refused() (transport.Transport, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return nil, err
	}
	return open(h.t, "smtp://"+urlUser(testUser, testPassword)+addr), nil
}

func (h *harness) Attempts() int {
	if h.s == nil {
		return 0
	}
	_, _, mails, _, _ := h.s.counts()
	return mails
}

func (h *harness) Received() ([]conformance.Received, error) {
	if h.s == nil {
		return nil, nil
	}
	var rs []conformance.Received
	for _, m := range h.s.mail() {
		r, err := conformance.ParseMIME(m.raw)
		if err != nil {
			return nil, err
		}
		r.To = m.to
		rs = append(rs, r)
	}
	return rs, nil
}

func (h *harness) Secret() string { return testPassword }

// Close stops the server, which also releases Hang and StallAfterData
// connections.
func (h *harness) Close() error {
	if h.s != nil {
		h.s.stop()
	}
	return nil
}

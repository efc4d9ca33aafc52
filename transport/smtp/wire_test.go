package smtp_test

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/transport"
)

// The tests in this file read the commands on the wire, so their servers
// speak without TLS. Each runs against a server that offers PIPELINING
// (go-smtp always does) and one that does not.

// withAndWithoutPipelining runs f against both kinds of server.
func withAndWithoutPipelining(t *testing.T, f func(t *testing.T, sc script, pipelining bool)) {
	for _, pipelining := range []bool{true, false} {
		name := "pipelining"
		if !pipelining {
			name = "no pipelining"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, script{tls: noTLS, noPipelining: !pipelining}, pipelining)
		})
	}
}

// TestReuseSendsOnlyTheTransaction: a mail on a reused connection costs
// its transaction and nothing more: no NOOP to check the connection first,
// no RSET after the mail. With PIPELINING, MAIL, RCPT and DATA go out as
// one group (one round trip); without it, one at a time. Each mail still
// has only its own recipient.
func TestReuseSendsOnlyTheTransaction(t *testing.T) {
	t.Parallel()
	withAndWithoutPipelining(t, func(t *testing.T, sc script, pipelining bool) {
		s := startServer(t, sc)
		tr := open(t, s.url(""))
		for i := range 3 {
			_, err := send(t, tr, message())
			require.NoError(t, err, "send %d", i)
		}
		want := [][]string{{"EHLO"}}
		for range 3 {
			if pipelining {
				want = append(want, []string{"MAIL", "RCPT", "DATA"})
			} else {
				want = append(want, []string{"MAIL"}, []string{"RCPT"}, []string{"DATA"})
			}
		}
		assert.Equal(t, [][][]string{want}, s.groups(), "commands on each connection, by the read that took them")
		require.Len(t, s.mail(), 3, "mails accepted")
		oneRecipientEach(t, s)
	})
}

// TestRefusalKeepsTheSession: a refusal (a 4xx or 5xx reply other than
// 421) is the server's answer about one mail, not about the connection:
// the transaction is ended with RSET (not needed after the reply to the
// whole mail), and the next mail goes out on the same connection with
// only its own recipient.
func TestRefusalKeepsTheSession(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		at       stage
		reply    string
		kind     transport.Kind
		wire     []string // the first mail's commands after EHLO, one at a time
		pipeWire []string // the same with PIPELINING
	}{
		{"550 at rcpt", atRcpt, "550 5.1.1 No such user", transport.Permanent,
			[]string{"MAIL", "RCPT", "RSET"}, []string{"MAIL", "RCPT", "DATA", "RSET"}},
		{"452 at rcpt", atRcpt, "452 4.2.2 Mailbox full", transport.Temporary,
			[]string{"MAIL", "RCPT", "RSET"}, []string{"MAIL", "RCPT", "DATA", "RSET"}},
		{"451 at mail", atMail, "451 4.3.0 Try again", transport.Temporary,
			[]string{"MAIL", "RSET"}, []string{"MAIL", "RCPT", "DATA", "RSET"}},
		{"554 after data", afterData, "554 5.7.1 Rejected as spam", transport.Permanent,
			[]string{"MAIL", "RCPT", "DATA"}, []string{"MAIL", "RCPT", "DATA"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			withAndWithoutPipelining(t, func(t *testing.T, sc script, pipelining bool) {
				s := startServer(t, sc)
				tr := open(t, s.url(""))
				s.set(tc.at, action{reply: tc.reply})
				_, err := send(t, tr, message())
				assert.Equal(t, tc.kind, classified(t, err).Kind, "kind of %v", err)
				s.set(tc.at, action{})
				_, err = send(t, tr, message())
				require.NoError(t, err, "send after a refusal")
				first := tc.wire
				if pipelining {
					first = tc.pipeWire
				}
				want := append(append([]string{"EHLO"}, first...), "MAIL", "RCPT", "DATA")
				assert.Equal(t, [][]string{want}, s.commands(), "commands on each connection")
				require.Len(t, s.mail(), 1, "mails accepted")
				assert.Equal(t, []string{message().To.Address}, s.mail()[0].to, "recipients of the mail after the refusal")
			})
		})
	}
}

// TestStaleReusedConnectionFailsOverAtMail: a reused connection that
// fails its MAIL FROM the way a connection the server let go fails (a
// 421, or no answer at all) costs the mail nothing: nothing was taken, and
// it goes out on a new connection.
func TestStaleReusedConnectionFailsOverAtMail(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		a    action
	}{
		{"421", action{reply: "421 4.4.2 mx.test Error: timeout exceeded", conn: 1}},
		{"silent", action{hang: true, conn: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			withAndWithoutPipelining(t, func(t *testing.T, sc script, pipelining bool) {
				s := startServer(t, sc)
				tr := open(t, s.url("timeout=1500ms"))
				_, err := send(t, tr, message())
				require.NoError(t, err)
				s.set(atMail, tc.a)
				_, err = send(t, tr, message())
				require.NoError(t, err, "send on a connection that went stale")
				assert.Len(t, s.mail(), 2, "mails accepted")
				stale := []string{"EHLO", "MAIL", "RCPT", "DATA", "MAIL"}
				if pipelining {
					stale = append(stale, "RCPT", "DATA")
				}
				assert.Equal(t, [][]string{stale, {"EHLO", "MAIL", "RCPT", "DATA"}}, s.commands(), "commands on each connection")
			})
		})
	}
}

// TestReplyAtMailOnReusedConnectionIsTheOutcome: any other reply to MAIL
// FROM on a reused connection is the server's answer to this mail, not a
// sign of a stale connection: it is the outcome, with no second try, and
// the connection stays (an RSET ends the transaction).
func TestReplyAtMailOnReusedConnectionIsTheOutcome(t *testing.T) {
	t.Parallel()
	withAndWithoutPipelining(t, func(t *testing.T, sc script, _ bool) {
		s := startServer(t, sc)
		tr := open(t, s.url(""))
		_, err := send(t, tr, message())
		require.NoError(t, err)
		s.set(atMail, action{reply: "451 4.3.0 Local error in processing"})
		_, err = send(t, tr, message())
		te := classified(t, err)
		assert.Equal(t, 451, te.Code, "code of %v", err)
		assert.Equal(t, transport.Temporary, te.Kind, "kind of %v", err)
		conns, _, _ := s.connStats()
		_, _, mails, _, _ := s.counts()
		assert.Equal(t, 1, conns, "connections")
		assert.Equal(t, 2, mails, "MAIL FROM the server saw")
	})
}

// TestIdleConnectionWithWordsWaitingIsNotUsedBlindly: a server that wrote
// to an idle connection (a 421 before closing, without closing yet) gets
// that answer read before any mail goes out on it: the mail goes out on a
// new connection.
func TestIdleConnectionWithWordsWaitingIsNotUsedBlindly(t *testing.T) {
	t.Parallel()
	withAndWithoutPipelining(t, func(t *testing.T, sc script, pipelining bool) {
		s := startServer(t, sc)
		tr := open(t, s.url(""))
		_, err := send(t, tr, message())
		require.NoError(t, err)
		require.NoError(t, s.say(1, "421 4.4.2 mx.test Error: timeout exceeded"))
		_, err = send(t, tr, message())
		require.NoError(t, err, "send after the server spoke on the idle connection")
		assert.Len(t, s.mail(), 2, "mails accepted")
		cmds := s.commands()
		require.Len(t, cmds, 2, "connections")
		// The 421 answers a NOOP when it had arrived before the Send
		// looked, else the MAIL FROM (sent with the rest of the envelope
		// when pipelining).
		atMail := []string{"EHLO", "MAIL", "RCPT", "DATA", "MAIL"}
		if pipelining {
			atMail = append(atMail, "RCPT", "DATA")
		}
		assert.Contains(t, [][]string{{"EHLO", "MAIL", "RCPT", "DATA", "NOOP"}, atMail}, cmds[0], "commands on the first connection")
		assert.Equal(t, []string{"EHLO", "MAIL", "RCPT", "DATA"}, cmds[1], "commands on the second connection")
	})
}

// TestPipelinedDataAcceptedAfterRefusal: a server may answer a pipelined
// DATA with 354 although it refused the only recipient. The client must
// not send a message then, not even an empty one: the outcome is the
// refusal, and the connection is closed mid-DATA, which makes the server
// drop the transaction. go-smtp never does this, so a scripted server
// plays it.
func TestPipelinedDataAcceptedAfterRefusal(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	afterData := make(chan string, 1) // what the client sent after the 354, up to its close
	go func() {
		c, err := ln.Accept()
		if err != nil {
			afterData <- "accept: " + err.Error()
			return
		}
		defer c.Close()
		r, w := bufio.NewReader(c), bufio.NewWriter(c)
		reply := func(lines ...string) {
			for _, l := range lines {
				_, _ = w.WriteString(l + "\r\n")
			}
			_ = w.Flush()
		}
		reply("220 mx.test ESMTP")
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				afterData <- "connection ended before DATA"
				return
			}
			switch verb, _, _ := strings.Cut(strings.TrimSpace(line), " "); strings.ToUpper(verb) {
			case "EHLO":
				reply("250-mx.test", "250-PIPELINING", "250 8BITMIME")
			case "MAIL":
				reply("250 2.1.0 Ok")
			case "RCPT":
				reply("550 5.1.1 No such user")
			case "DATA":
				reply("354 End data with <CR><LF>.<CR><LF>")
				var rest strings.Builder
				for {
					l, err := r.ReadString('\n')
					rest.WriteString(l)
					if err != nil {
						afterData <- rest.String()
						return
					}
				}
			default:
				reply("502 5.5.2 Not expected here")
			}
		}
	}()
	tr := open(t, "smtp://"+ln.Addr().String()+"?tls=none")
	_, err = tr.Send(context.Background(), message())
	te := classified(t, err)
	assert.Equal(t, transport.Permanent, te.Kind, "kind of %v", err)
	assert.Equal(t, 550, te.Code, "code of %v", err)
	assert.Empty(t, <-afterData, "what the client sent after a 354 that followed the refusal")
}

// TestIdleLongerThanTimeoutIsReused: the I/O timeout bounds each command,
// not how long a connection may wait in the pool; one that waited longer
// than the timeout (but less than idle_timeout) carries the next mail,
// with no NOOP.
func TestIdleLongerThanTimeoutIsReused(t *testing.T) {
	t.Parallel()
	s := startServer(t, script{tls: noTLS})
	tr := open(t, s.url("timeout=1s&idle_timeout=1m"))
	_, err := send(t, tr, message())
	require.NoError(t, err)
	time.Sleep(1500 * time.Millisecond) // past the timeout the last reply set
	_, err = send(t, tr, message())
	require.NoError(t, err)
	assert.Equal(t, [][]string{{"EHLO", "MAIL", "RCPT", "DATA", "MAIL", "RCPT", "DATA"}}, s.commands(), "commands on each connection")
}

// Package conformance is the test suite every mailspool transport adapter
// passes. An adapter's tests call it once:
//
//	func TestConformance(t *testing.T) {
//		conformance.RunTransportTests(t, newHarness)
//	}
//
// # The harness
//
// A [Harness] is a scenario factory over the adapter's real backend (an
// in-process SMTP server, an httptest server standing in for an API), not a
// mock of the adapter. The suite calls the [HarnessMaker] once per case (and
// once per sub-case where a case needs several scenarios), calls Open once
// on each harness, and closes every harness and transport when the case
// ends. A harness must:
//
//   - make its backend answer every Send of the opened Transport as the
//     scenario says (table below), or return an error wrapping
//     [ErrUnsupported] with the reason when the backend cannot express it
//     (an HTTP API has no SMTP replies, an SMTP server no HTTP statuses): the
//     case is then skipped with that reason. Any other error fails the case;
//   - count in Attempts every delivery attempt that reached the wire (an SMTP
//     transaction started with MAIL FROM, an HTTP send request received), so
//     the suite can see retries;
//   - show in Received the mails its backend accepted, decoded ([ParseMIME]
//     turns raw MIME into a [Received]; [ReceivedFromMessage] serves backends
//     that record structured fields), with Received.To the envelope
//     recipients where the backend knows them; or return [ErrUnsupported];
//   - return from Secret a credential it gave the transport (the URL's
//     password, the API key), or "" when there is none;
//   - release everything in Close, including connections it holds open for
//     Hang and StallAfterData, so the adapter's pending Send can return.
//
// # Scenarios
//
// Each scenario is a case whose subtest name is the scenario's string. One
// Send with a fresh test message must return:
//
//	scenario          backend behaviour                     outcome
//	accept            accepts, returns an id                Sent, Receipt.MessageID non-empty,
//	                                                        Attempts() == 1, one mail received
//	smtp-421          421 4.7.0 at greeting or MAIL FROM    Temporary, Code 421, Enhanced 4.7.0
//	smtp-450          450 4.2.1 at RCPT TO                  Temporary, 450, 4.2.1
//	smtp-451          451 4.3.0 after the DATA terminator   Temporary, 451, 4.3.0
//	smtp-452          452 4.2.2 at RCPT TO                  Temporary, 452, 4.2.2
//	smtp-550          550 5.1.1 at RCPT TO                  Permanent, 550, 5.1.1
//	smtp-552          552 5.2.2 after the DATA terminator   Permanent, 552, 5.2.2 (classify's
//	                                                        mailbox-full rule)
//	smtp-553          553 5.1.3 at RCPT TO                  Permanent, 553, 5.1.3
//	smtp-554          554 5.7.1 after the DATA terminator   Permanent, 554, 5.7.1
//	hang              accepts the connection, never answers Connection or Temporary, within
//	                                                        the 1 s context deadline + 2 s
//	refused           nothing listens                       Connection
//	tls-failure       certificate does not verify (or       Connection, and nothing received
//	                  STARTTLS required but not offered)
//	stall-after-data  reads the whole mail, never answers   Temporary + MaybeDelivered, within
//	                                                        the 1.5 s context deadline + 2 s
//	http-429          429 with Retry-After: 7               Temporary, Code 429, RetryAfter 7 s
//	http-401          401                                   Connection, Code 401
//	http-500          500                                   Temporary, Code 500
//
// Every failure also has the scope classify gives it: an SMTP reply the
// scope of classify's table for the reply (smtp-550, -552, -553
// recipient; smtp-554 message; the 4xx transient or recipient), refused,
// tls-failure and http-401 lane, hang lane or transient, stall-after-data,
// http-429 and http-500 transient; and a Permanent outcome is always of
// recipient or message scope.
//
// SMTP replies carry the exact text of [Scenario.Reply]; their Detail must
// not be empty. The kind each must have is the one package classify's
// decision table gives the reply (the table above shows it): the suite
// follows classify rather than holding rules of its own. Only
// stall-after-data may set MaybeDelivered. After the one Send, Attempts()
// must be at most 1: adapters never retry.
//
// # Generic cases
//
// These run on the accept scenario:
//
//	one-attempt-per-send  3 sends are Attempts() == 3; one failing send (smtp-451,
//	                      else http-500) is exactly 1 attempt
//	cancelled-context     an already cancelled context returns an error within 2 s,
//	                      not Sent and not Permanent
//	concurrent-send       8 goroutines × 4 sends on one transport: all Sent, 32
//	                      attempts, 32 distinct Receipt.MessageIDs, 32 mails received
//	close                 Close returns nil, a second Close returns nil too; Send after
//	                      Close fails without reaching the wire, not Permanent
//	intact-content        UTF-8 subject and display names, text and HTML bodies (with
//	                      a "." line and a "From " line), Reply-To, List-Unsubscribe,
//	                      List-Unsubscribe-Post and X-Mailspool-Test headers and the
//	                      Message-ID arrive as sent, for exactly one recipient;
//	                      bodies compare equal up to trailing newlines
//	receipt-message-id    every Receipt.MessageID is non-empty; Send does not modify
//	                      the caller's Message; a set MessageID arrives as the
//	                      Message-Id header on every send, an unset one is generated
//	no-secret-in-errors   in every failing scenario the harness supports (one
//	                      sub-case each), neither the error text nor any Detail in
//	                      its chain contains Secret(), also URL-escaped
//
// # Watchdog
//
// Every case runs under a 30 s watchdog. When it expires the suite prints
// every goroutine's stack and panics with the case's name: a hanging adapter
// fails CI instead of stalling it (t.FailNow cannot stop a test from another
// goroutine). Failure messages never show the harness's secret.
package conformance

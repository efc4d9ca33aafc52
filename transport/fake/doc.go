// Package fake is a mailspool transport that replays recorded provider
// responses: the reference adapter of the conformance suite, and a test
// double for programs that send mail through mailspool.
//
// A fake returns exactly what a real adapter returns for the same response:
// SMTP replies, HTTP responses and network failures go through package
// classify, so a 550 5.1.1 from the fake is the same Permanent
// *transport.Error, with the same code, enhanced code and Detail, as one from
// the SMTP adapter. It records a copy of every message it was given
// ([Transport.Messages], [Transport.Sent], [Transport.Attempts]).
//
// # URL
//
//	fake://?script=ok,421,450,550,timeout,refused
//	fake://?script=ok,421&cycle=true&latency=5ms
//	fake://?recipient=true&timeout=2s
//
// Each Send consumes the next step of the script; the last step repeats,
// or with cycle=true the script starts over. With recipient=true a Send
// takes the step named by the recipient's plus tag (user+550@example.com
// takes 550, user+timeout@example.com times out), deterministic per
// message; a recipient without such a tag takes the next script step ("ok"
// when there is no script). timeout bounds hang and stall steps when the
// context has no earlier deadline (default [DefaultTimeout]); latency is
// how long every Send takes, honouring its context. Unknown parameters or
// steps are errors.
//
// # Steps
//
// A step names a recorded response, a file testdata/<step>.resp embedded in
// the package:
//
//	step            recorded response                                   outcome
//	ok              250 2.0.0 OK (Gmail)                                Sent
//	421             421 4.7.0 rate limited (Gmail, multi-line)          Temporary
//	450             450 4.2.1 receiving mail too fast (Gmail)           Temporary
//	451             451 4.3.0 queue file write error (Postfix)          Temporary
//	452             452 4.2.2 over quota (Gmail)                        Temporary
//	550             550 5.1.1 no such user (Gmail, multi-line)          Permanent
//	552             552 5.2.2 Mailbox full                              Permanent
//	gmail-552       552 5.2.2 over quota and inactive (Gmail)           Permanent (mailbox full)
//	553             553 5.1.3 not a valid RFC 5321 address (Gmail)      Permanent
//	554             554 5.7.1 rejected as spam (Exchange)               Permanent
//	ses-smtp-454    454 Throttling failure (SES SMTP)                   Temporary
//	http-429        429 with Retry-After: 7                             Temporary, RetryAfter 7s
//	http-401        401 revoked API key (SendGrid)                      Connection
//	http-500        500 internal error (SendGrid)                       Temporary
//	ses-throttling  429 TooManyRequestsException (SES v2)               Temporary
//	sendgrid-429    429 too many requests (SendGrid)                    Temporary
//	timeout, hang   no greeting: blocks until ctx, timeout or Close     Connection (i/o timeout)
//	refused         connect: connection refused                         Connection
//	tls             certificate signed by an unknown authority          Connection
//	stall           no answer after the DATA terminator: blocks         Temporary, MaybeDelivered
//
// One step is not a recorded response: "panic" makes Send panic, as a bug
// in an adapter or a mail that crashes its parser would. It exists for
// crash tests (a worker process that dies on one message, under a
// supervisor that restarts it); fake://?recipient=true with a recipient
// user+panic@example.com crashes on that mail only.
//
// # Fixture format
//
// A fixture file starts with "key: value" header lines, then a blank line,
// then the payload. The header "kind" is required, "note" says where the
// response was recorded:
//
//	kind: smtp-reply
//	note: Gmail, at RCPT TO, for an address that does not exist
//
//	550-5.1.1 The email account that you tried to reach does not exist. Please try
//	550 5.1.1  https://support.google.com/mail/?p=NoSuchUser ... - gsmtp
//
// The kinds and their payloads:
//
//	smtp-reply  the reply as the server sent it, one line or many; sent to
//	            classify.SMTPReply with CRLF line ends
//	http        the raw HTTP response (status line, headers, blank line, body);
//	            sent to classify.HTTP
//	hang        (payload ignored) the server never answers: classify.Error of
//	            the read timeout a client sees
//	refused     (payload ignored) classify.Error of a refused dial
//	tls         (payload ignored) classify.Error of a certificate failure
//	stall       (payload ignored) the mail was handed over, then no answer:
//	            classify.MaybeDelivered of the read timeout
//
// A fixture that classifies as a success (a 250 reply, a 2xx status) is an
// accepting step.
package fake

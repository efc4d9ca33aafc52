// Package classify turns what mail providers and networks answer into
// classified errors: every function returns nil for success or a
// *transport.Error whose Kind tells the queue what to do, with the SMTP basic
// code or HTTP status, the RFC 3463 enhanced code, a retry hint, a short
// Detail that is safe to store, whether the failure concerns one recipient
// (Recipient) and the name of the rule that decided (Rule).
//
// The functions are pure (HTTP reads the clock for an HTTP-date) and safe
// for concurrent use. Provider-specific tables (SES exception names,
// SendGrid quirks) live in their adapters; this package holds the generic
// ones: SMTP replies ([SMTPReply], [SMTP]), Go errors ([Error],
// [MaybeDelivered]) and HTTP responses ([HTTP], [RetryAfter]). Operators add
// their own rules, tried before the built-in ones ([Rule], [NewRules],
// [Rules.Apply], [Rules.Transport]); [Explain] returns a decision with the
// rule that made it.
//
// # Two guarantees
//
// A failure of our own login, account, sender or setup is never
// Permanent, whatever its code and whichever provider words it: the mail is
// fine, the lane is misconfigured. A reply about one recipient is never
// Connection, and has Recipient set: it never feeds the lane's breaker,
// which counts only lane-level failures (no reply at all, TLS,
// authentication, our own account).
//
// # SMTP replies
//
// The kind comes from the basic code, the enhanced code and the text, never
// from the first character of a string. The basic code governs the class:
// an enhanced code of the other class ("550 4.4.7", "451 5.7.1") does not
// turn a 5xx into a retry or a 4xx into a bounce; only the lane-level
// rules below apply to both. The first matching rule decides:
//
//	rule                     reply                                          kind        about
//	(success)                2xx, 3xx                                       nil
//	smtp-our-account         4xx or 5xx naming our account's limits or      Connection  lane
//	                         state: "sending quota", "daily limit",
//	                         "sending suspended", "tenant has exceeded",
//	                         "bad outbound sender", "not authorized to
//	                         perform", "maximum credits exceeded", "main
//	                         account unavailable", "spam abuse detected",
//	                         "your account ... suspended|disabled|blocked";
//	                         Exchange x.7.501, x.7.511, x.7.705, x.7.708,
//	                         x.7.750
//	smtp-4xx                 any other 4xx                                  Temporary   by its words
//	smtp-auth                5xx asking for authentication or refusing our  Connection  lane
//	                         credentials: 525 526 530 534 535 538, x.7.8,
//	                         x.7.9 (unless "policy"), x.7.12, x.7.14,
//	                         x.7.57, x.7.139, x.7.13 with "authenticat",
//	                         x.7.0 with "authenticat", "authentication
//	                         required|failed|unsuccessful", "not
//	                         authenticated", "invalid login",
//	                         "unauthenticated senders not allowed",
//	                         "authorization required"
//	smtp-encryption          5xx demanding TLS: x.7.10, x.7.11,             Connection  lane
//	                         "starttls", "encryption required"
//	smtp-sender              5xx refusing our sender: x.1.7, x.1.8,         Connection  lane
//	                         x.7.60, "not verified", "sender identity",
//	                         "sender address rejected", "not owned by",
//	                         "mail from must equal authorized user",
//	                         "permission to send as", "local user only",
//	                         "not allowed to send", "unregistered domain"
//	smtp-helo                5xx about our HELO/EHLO                        Connection  lane
//	smtp-relay               5xx refusing to relay ("relay access denied",  Connection  lane
//	                         "unable to relay")
//	smtp-ambiguous           a 5xx a lane rule above matches but            Temporary   recipient
//	                         that rejects a recipient ("recipient address
//	                         rejected", "user unknown", "mailbox
//	                         unavailable"): neither a lane pause nor a
//	                         destroyed mail
//	smtp-recipient-disabled  5xx: recipient's account or mailbox disabled,  Permanent   recipient
//	                         discontinued, suspended, locked: x.2.1,
//	                         x.7.13, or those words
//	smtp-quota-temporary     5xx mailbox full or over quota whose text      Temporary   recipient
//	                         says it passes ("temp", "try again", "later")
//	smtp-mailbox-full        5xx mailbox full or over quota: x.2.2, or      Permanent   recipient
//	                         "quota", "mailbox full", "storage allocation",
//	                         "overquota" without an enhanced code or with
//	                         an x.2.x one ("552 5.2.2 Mailbox full")
//	smtp-routing             5xx with an x.4.x code (routing, a mail loop,  Permanent   by its words
//	                         "too many hops")
//	smtp-passing             5xx about a rate or a passing condition:       Temporary   by its words
//	                         "too many" (not hops), "throttl", "try again
//	                         later", "temporar", "rate limit", "frequency",
//	                         "try again in N"
//	smtp-recipient           5xx about the recipient: x.1.x (not x.1.7,     Permanent   recipient
//	                         x.1.8), x.2.x, or words naming the recipient,
//	                         its mailbox or user ("no such user",
//	                         "mailbox not found", "does not exist")
//	smtp-5xx                 any other 5xx: x.3.x, x.5.x, x.6.x, x.7.1      Permanent   by its words
//	                         policy or spam, x.7.23-x.7.27 SPF, DKIM, DMARC
//	smtp-unparsable          empty or unparsable reply                      Temporary
//	smtp-invalid-code        code outside 200-599                           Temporary
//
// "about" is what sets Recipient: lane rules never, recipient rules
// always, the others when the reply has an x.1.x (not x.1.7, x.1.8), x.2.x
// or x.7.13 code or words naming the recipient, its mailbox or its user.
//
// A retry hint in the text ("try again in 5 minutes", "retry after 120
// seconds", "retry in 1 hour", "wait 30s") becomes RetryAfter, capped at
// [MaxRetryAfter].
//
// # Go errors
//
// [Error] finds the reply in a *net/textproto.Error or in an error's text
// (then the table above decides, or smtp-unexpected-success for a 2xx or
// 3xx), and otherwise:
//
//	rule             error                                             kind
//	go-canceled      context.Canceled                                  Temporary
//	go-deadline      context.DeadlineExceeded                          Connection
//	net-timeout      a timeout: "i/o timeout", "connection timed out"  Connection
//	                 (the kernel's SYN timeout), ETIMEDOUT
//	net-dns          *net.DNSError, "no such host", "server
//	                 misbehaving", "lame referral", "no answer from
//	                 DNS server", "cannot unmarshal DNS message"       Connection
//	net-refused      "connection refused", ECONNREFUSED                Connection
//	net-unreachable  "no route to host", "network is unreachable",     Connection
//	                 "host is down", "network is down"
//	net-dropped      reset, aborted, broken pipe, EOF, closed          Connection
//	net-tls          TLS handshake and certificate failures            Connection
//	net-error        any other *net.OpError                            Connection
//	go-unknown       anything else: one retry too many is better than  Temporary
//	                 dropping a good mail
//
// The texts are Go 1.26's, so that an error an SMTP library flattened to a
// string (go-mail keeps no cause) is still recognised. [MaybeDelivered] is
// for a failure without a reply after the whole mail was sent: Temporary,
// rule maybe-delivered, and the mail may already be delivered.
//
// # HTTP responses
//
// [HTTP] maps the status and takes Detail from a JSON or plain-text body:
//
//	rule           status                                         kind
//	http-429       429, RetryAfter from Retry-After or            Temporary
//	               X-RateLimit-Reset
//	http-5xx       5xx, RetryAfter from Retry-After               Temporary
//	http-rejected  400 413 422: the provider rejects this mail    Permanent
//	http-setup     401 402 403 404 405 407 410 411 414 415 421    Connection
//	               426 431: key, account, endpoint or request
//	http-4xx       other 4xx (408 409 425)                        Temporary
//	http-invalid   not a valid HTTP status                        Temporary
//
// Adapters refine these with their provider's error names (SES's rules
// are named "ses-" and the exception, e.g. ses-InvalidParameterValue-address).
//
// # Operator rules
//
// A [Rule] matches on the basic code or HTTP status, the enhanced code, a
// regular expression over the reply text, and a provider's error name, and
// names the kind (and optionally a RetryAfter). A lane's rules come before
// the built-in tables: [Rules.Apply] tries them in order on the built-in
// result, the first match decides, its Rule is "operator:NAME", and what the
// reply was (code,
// enhanced code, Detail, Recipient, MaybeDelivered) is kept — so an
// operator's rule can never make a reply about one recipient pause a lane.
package classify

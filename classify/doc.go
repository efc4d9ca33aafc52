// Package classify turns what mail providers and networks answer into
// classified errors: every function returns nil for success or a
// *transport.Error whose Kind tells the queue what to do and whose Scope
// says what the failure is about, with the SMTP basic code or HTTP status,
// the RFC 3463 enhanced code, a retry hint, a short Detail that is safe to
// store and the name of the rule that decided (Rule).
//
// The functions are pure (HTTP reads the clock for an HTTP-date) and safe
// for concurrent use. Provider-specific tables (SES exception names,
// SendGrid quirks) live in their adapters; this package holds the generic
// ones: SMTP replies ([SMTPReply], [SMTP], and [Session] for what an
// adapter knows of the session), Go errors ([Error], [MaybeDelivered]) and
// HTTP responses ([HTTP], [RetryAfter]). Operators add their own rules,
// tried before the built-in ones ([Rule], [NewRules], [Rules.Apply],
// [Rules.Transport]); [Explain] returns a decision with the rule that made
// it.
//
// # Scopes
//
// Every verdict has a scope ([transport.Scope]): recipient (this address),
// message (this content), sender (our account, sending domain, envelope
// sender, relay policy, our IP's reputation), transient (now: rates,
// greylisting, a busy server) or lane (the connection or the provider as a
// whole: no reply, TLS, DNS, authentication). The scope decides what the
// outcome may do:
//
//   - Permanent only with evidence of recipient or message scope: an
//     enhanced code whose subject is the address or the content (x.1.1 to
//     x.1.6, x.1.10, x.2.1, x.2.2, x.2.3, x.3.4, x.4.4, x.6.x, x.7.13,
//     Exchange's x.7.133-x.7.136) or words naming them. A 5xx without such
//     evidence is Temporary (or Connection when it names the lane): it is
//     retried on the schedule and fails at the end of its attempts, and the
//     operator sees its rule counted (a burned retry is cheap, a destroyed
//     receipt is not).
//   - A 5xx at MAIL FROM is about our sender (or the declared size): there
//     is no recipient yet. When the lane submits through a relay
//     ([Session].Relay), a 5xx whose words speak of the sender, the domain,
//     the account or the policy is about our sender too.
//   - Only lane scope (with Kind Connection) feeds the lane's breaker; only
//     recipient scope may ever suppress an address; sender scope raises the
//     lane's alert.
//
// A failure of our own login, account, sender or setup is never Permanent,
// whatever its code and whichever provider words it: the mail is fine, the
// lane is misconfigured. A reply about one recipient is never Connection.
//
// # SMTP replies
//
// The kind comes from the basic code, the enhanced code and the text, never
// from the first character of a string. The basic code governs the class:
// an enhanced code of the other class ("550 4.4.7", "451 5.7.1") does not
// turn a 5xx into a retry or a 4xx into a bounce; only the lane-level
// rules below apply to both. The first matching rule decides:
//
//	rule                     reply                                          kind        scope
//	(success)                2xx, 3xx                                       nil
//	smtp-our-account         4xx or 5xx naming our account's limits or      Connection  sender
//	                         state: "sending quota", "daily limit",
//	                         "sending suspended", "tenant has exceeded",
//	                         "bad outbound sender", "not authorized to
//	                         perform", "maximum credits exceeded", "main
//	                         account unavailable", "spam abuse detected",
//	                         "your account ... suspended|disabled|blocked";
//	                         Exchange x.7.501, x.7.511, x.7.705, x.7.708,
//	                         x.7.750
//	smtp-4xx                 any other 4xx                                  Temporary   by evidence
//	smtp-at-auth             a 5xx answering AUTH                           Connection  lane
//	smtp-recipient-policy    5xx from a recipient that takes mail only      Permanent   recipient
//	                         from some senders: RESOLVER.RST.*, x.7.133 to
//	                         x.7.136, "not allowed to send mail to",
//	                         "permission to post to" (not at MAIL FROM)
//	smtp-auth                5xx asking for authentication or refusing our  Connection  lane
//	                         credentials: 526 530 534 535 538, 525 (not
//	                         x.7.13), x.7.8, x.7.9 (unless "policy"),
//	                         x.7.12, x.7.14, x.7.57, x.7.139, "authentication
//	                         required|failed|unsuccessful", "invalid login",
//	                         "authorization required"
//	smtp-encryption          5xx demanding TLS: x.7.10, x.7.11,             Connection  lane
//	                         "starttls", "encryption required"
//	smtp-sender              5xx refusing our sender: x.1.7, x.1.8,         Connection  sender
//	                         x.7.60, "not verified", "sender identity",
//	                         "sender address rejected", "invalid sender",
//	                         "sender verify failed", "not owned by", "mail
//	                         from must equal authorized user", "permission
//	                         to send as", "SendAsDenied", "relaying
//	                         disallowed as", "not allowed to send"
//	smtp-helo                5xx about our HELO/EHLO                        Connection  lane
//	smtp-relay               5xx refusing to relay ("relay access denied",  Connection  lane
//	                         "unable to relay", "as a relay")
//	smtp-ambiguous           a 5xx a Connection rule above matches but      Temporary   recipient
//	                         that rejects a recipient ("recipient address
//	                         rejected", "user unknown", "mailbox
//	                         unavailable"): neither a lane pause nor a
//	                         destroyed mail
//	smtp-mail-from           a 5xx answering MAIL FROM, unless about the    Temporary   sender
//	                         message's size
//	smtp-recipient-disabled  5xx: recipient's account or mailbox disabled,  Permanent   recipient
//	                         discontinued, suspended, locked: x.2.1,
//	                         x.7.13, or those words
//	smtp-quota-temporary     5xx mailbox full or over quota whose text      Temporary   recipient
//	                         says it passes ("temp", "try again", "later")
//	smtp-mailbox-full        5xx mailbox full or over quota: x.2.2, or      Permanent   recipient
//	                         "quota", "mailbox full", "storage allocation",
//	                         "overquota" without an enhanced code or with
//	                         an x.2.x one ("552 5.2.2 Mailbox full")
//	smtp-sender-policy       5xx about our IP or domain: SPF, DKIM, DMARC,  Temporary   sender
//	                         x.7.23-x.7.27, block lists ("blocked using",
//	                         Spamhaus, Cloudmark, "RBL"), reputation,
//	                         reverse DNS, spoofing, blocked senders; or,
//	                         without recipient or message evidence, a
//	                         policy or the sender named (at a relay also
//	                         the domain or the account)
//	smtp-passing             5xx about a rate or a passing condition:       Temporary   transient
//	                         "too many" (not hops), "throttl", "try again
//	                         later", "temporar", "rate limit", "frequency"
//	smtp-routing             5xx with an x.4.x code and evidence about the  Permanent   recipient
//	                         recipient (x.4.4, a mail loop, "too many hops")
//	smtp-recipient           5xx about the recipient: x.1.x (not x.1.0,     Permanent   recipient
//	                         x.1.7, x.1.8), x.2.x (not x.2.0, x.2.3), or
//	                         words naming the recipient's address, mailbox
//	                         or user ("no such user", "user unknown",
//	                         "recipient address rejected", "mailbox not
//	                         found", "does not exist")
//	smtp-message             5xx about the message: x.3.4, x.6.x, x.2.3,    Permanent   message
//	                         or words about its size, form or content
//	                         ("message size exceeds", "virus", "spam",
//	                         "unsolicited", "attachment", "header")
//	smtp-5xx                 any other 5xx: no evidence about the           Temporary   transient
//	                         recipient or the message ("550 Blocked",
//	                         "554 5.7.1 Delivery not authorized")
//	smtp-unparsable          empty or unparsable reply                      Temporary   transient
//	smtp-invalid-code        code outside 200-599                           Temporary   transient
//
// "by evidence" (a 4xx) is recipient or message when the codes or words
// show it, sender for a block list, reputation or domain authentication,
// and otherwise transient; greylisting is transient whatever it names.
//
// A retry hint in the text ("try again in 5 minutes", "retry after 120
// seconds", "retry in 1 hour", "wait 30s") becomes RetryAfter, capped at
// [MaxRetryAfter].
//
// # Go errors
//
// [Error] finds the reply in a *net/textproto.Error or in an error's text
// (then the table above decides, or smtp-unexpected-success for a 2xx or
// 3xx), and otherwise (every Connection here is of lane scope, every
// Temporary transient):
//
//	rule             error                                             kind
//	go-canceled      context.Canceled                                  Temporary
//	go-deadline      context.DeadlineExceeded                          Connection
//	net-timeout      a timeout: "i/o timeout", "connection timed out"  Connection
//	                 (the kernel's SYN timeout), ETIMEDOUT
//	net-dns          *net.DNSError, "lookup NAME[ on SERVER]: ...",
//	                 "no such host", "server misbehaving", "lame
//	                 referral", "no answer from DNS server", the C
//	                 resolver's "Temporary failure in name
//	                 resolution", "Name or service not known", ...     Connection
//	net-refused      "connection refused", ECONNREFUSED                Connection
//	net-unreachable  "no route to host", "network is unreachable",     Connection
//	                 "host is down", "network is down", "cannot
//	                 assign requested address", "address family not
//	                 supported", a firewall's EACCES or EPERM
//	net-dropped      reset, aborted, broken pipe, EOF, closed          Connection
//	net-tls          TLS handshake and certificate failures            Connection
//	net-error        any other *net.OpError, "dial tcp ...", go-mail's  Connection
//	                 "dial failed: ...", "missing port in address"
//	go-unknown       anything else: one retry too many is better than  Temporary
//	                 dropping a good mail
//
// The texts are Go 1.26's, so that an error an SMTP library flattened to a
// string (go-mail keeps no cause) is still recognised, with IPv4 or IPv6
// addresses, in any wrapper. [MaybeDelivered] is for a failure without a
// reply after the whole mail was sent: Temporary, transient, rule
// maybe-delivered, and the mail may already be delivered.
//
// # HTTP responses
//
// [HTTP] maps the status and takes Detail from a JSON or plain-text body:
//
//	rule           status                                         kind        scope
//	http-429       429, RetryAfter from Retry-After or            Temporary   transient
//	               X-RateLimit-Reset
//	http-5xx       5xx, RetryAfter from Retry-After               Temporary   transient
//	http-sender    400 401 402 403 404 405 407 410 411 413 414    Connection  sender
//	               415 421 422 426 431 whose message names our
//	               sender, its identity, domain or our account
//	               ("The from address does not match a verified
//	               Sender Identity")
//	http-rejected  400 413 422: the provider rejects this mail    Permanent   message
//	http-setup     401 402 403 404 405 407 410 411 414 415 421    Connection  lane
//	               426 431: key, account, endpoint or request
//	http-4xx       other 4xx (408 409 425)                        Temporary   transient
//	http-invalid   not a valid HTTP status                        Temporary   transient
//
// Adapters refine these with their provider's error names (SES's rules
// are named "ses-" and the exception, e.g. ses-InvalidParameterValue-address).
//
// # Operator rules
//
// A [Rule] matches on the basic code or HTTP status, the enhanced code, a
// regular expression over the reply text, and a provider's error name, and
// names the kind (and optionally the scope and a RetryAfter). A lane's
// rules come before the built-in tables: [Rules.Apply] tries them in order
// on the built-in result, the first match decides, its Rule is
// "operator:NAME", and what the reply was (code, enhanced code, Detail,
// MaybeDelivered) is kept, and its scope unless the rule sets one. A
// Permanent rule's scope must be recipient or message; left unset on a
// reply of another scope, it becomes message (never recipient: an
// operator's rule never suppresses an address by itself).
package classify

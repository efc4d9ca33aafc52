// Package classify turns what mail providers and networks answer into
// classified errors: every function returns nil for success or a
// *transport.Error whose Kind tells the queue what to do, with the SMTP basic
// code or HTTP status, the RFC 3463 enhanced code, a retry hint and a short
// Detail that is safe to store.
//
// The functions are pure (HTTP reads the clock for an HTTP-date) and safe
// for concurrent use. Provider-specific tables (SES exception names,
// SendGrid quirks) live in their adapters; this package holds the generic
// ones: SMTP replies ([SMTPReply], [SMTP]), Go errors ([Error],
// [MaybeDelivered]) and HTTP responses ([HTTP], [RetryAfter]).
//
// # SMTP replies
//
// The kind comes from the basic code, the enhanced code and the text, never
// from the first character of a string. When the enhanced class (4 or 5)
// disagrees with the basic code's, the enhanced class wins. The first
// matching row decides:
//
//	reply                                                        kind
//	2xx, 3xx                                                     success (nil)
//	4xx or 5xx naming our account's limits or state:             Connection
//	  "sending quota", "message quota", "daily quota", "sending
//	  limit", "daily limit", "sending suspended|paused|disabled",
//	  "tenant has exceeded", "bad outbound sender", "not
//	  authorized to perform", Exchange x.7.705, x.7.708, x.7.750,
//	  "account ... suspended|disabled|blocked|paused|deactivated"
//	  unless the enhanced code is x.1.x or x.2.x (the recipient's)
//	other 4xx                                                    Temporary
//	5xx asking for authentication or encryption: 530, 534, 535,  Connection
//	  538, x.7.8, x.7.9 to x.7.14 unless the text says "policy"
//	  (Yahoo's 5.7.9 policy rejection), x.7.0 with "authenticat",
//	  "starttls", "encryption required", "tls required"
//	5xx relay refused ("relay access denied", "unable to relay") Connection
//	5xx sender identity "not verified"                           Connection
//	5xx about rates or a passing condition: "too many",          Temporary
//	  "throttl", "try again later", "temporar", "rate limit",
//	  "frequency", "try again in N"
//	5xx about the recipient's quota: "quota", "exceeded storage" Temporary
//	  with no enhanced code or an x.2.x one
//	other 5xx: x.1.x bad address, x.2.x, x.3.x, x.4.x, x.5.x,    Permanent
//	  x.6.x, x.7.1 policy or spam, x.7.23-x.7.27 SPF, DKIM, DMARC
//	empty, unparsable, code outside 200-599                      Temporary
//
// A retry hint in the text ("try again in 5 minutes", "retry after 120
// seconds", "retry in 1 hour", "wait 30s") becomes RetryAfter, capped at
// [MaxRetryAfter].
//
// # Go errors
//
// [Error] finds the reply in a *net/textproto.Error or in an error's text,
// and otherwise classifies DNS, refused, reset, EOF, timeouts, TLS and
// certificate failures as Connection (nothing was handed over), a
// cancelled context as Temporary and anything unknown as Temporary: one
// retry too many is better than dropping a good mail. [MaybeDelivered] is
// for a failure without a reply after the whole mail was sent: Temporary,
// and the mail may already be delivered.
//
// # HTTP responses
//
// [HTTP] maps the status (429 and 5xx Temporary with Retry-After; 400, 413,
// 422 Permanent; 401, 403, 404 and other setup errors Connection; other 4xx
// Temporary) and takes Detail from a JSON or plain-text body.
package classify

// Package transport is the contract between the mailspool queue and the
// adapters that hand mail to a provider (SMTP, Amazon SES, SendGrid, a fake).
//
// It imports the standard library only. An adapter implements [Transport];
// the queue calls Send once per delivery attempt and decides what happens next
// from [KindOf] of the returned error alone:
//
//	Kind        meaning                                      queue action
//	Sent        the provider accepted the mail (nil error)   mark sent, store Receipt.MessageID
//	Temporary   try later: SMTP 4xx, HTTP 429/5xx, throttling retry on the schedule, then fail
//	Permanent   will never succeed: 550 5.1.1 no such user   fail at once, never retry
//	Connection  could not talk to the provider, or our own   retry on a longer schedule; many
//	            setup is wrong (auth, TLS, unverified from)  in a row pause the whole lane
//
// A [*Error] in the chain carries the details: the SMTP basic code or HTTP
// status, the RFC 3463 enhanced code, a provider's retry hint, and whether the
// mail may already have been delivered (a drop after the DATA terminator or
// after an HTTP request body was sent). An error with no *Error in its chain is
// Temporary: one retry too many is better than dropping a good mail.
//
// Adapters are opened from a URL through a [Mux], in which each adapter
// package registers its [URLOpener] under its scheme.
package transport

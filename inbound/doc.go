// Package inbound is mailspool's public side: the webhooks through which
// mail providers report what became of the mail they accepted (bounces,
// complaints, deliveries), verified, recorded and learnt from.
//
// NewHandler returns one http.Handler, for an application to mount in its
// own router (mailspool serve runs it on a listener of its own):
//
//	POST /webhooks/ses       Amazon SES notifications through Amazon SNS
//	POST /webhooks/sendgrid  the SendGrid Event Webhook
//
// Every request is verified before anything is written or fetched: the
// body is bounded; an SNS message must come from an allowed TopicArn,
// within the time window, with a signing-certificate URL on
// sns.<region>.amazonaws.com (or the China partition's amazonaws.com.cn)
// and nothing else, and carry a valid SignatureVersion 1 (SHA1withRSA) or 2
// (SHA256withRSA) signature; a SendGrid post must carry a valid ECDSA P-256
// signature over its timestamp and raw body, within the time window. Bad
// input gets a 4xx and changes nothing; no certificate is fetched for a
// message that fails an earlier check. A subscription is confirmed only for
// an allowed topic.
//
// A verified post becomes one Event per recipient (from SES's
// bouncedRecipients, complainedRecipients, ..., never the first
// destination alone), stored in the mailspool_events table deduplicated by
// the provider's event id: the same event posted three times is one row.
// In the same transaction, a hard bounce or a complaint (and an
// unsubscribe, when Options.UnsubscribeScope names a scope) suppresses
// the recipient (package suppress); soft bounces, blocks, drops and
// delays never do. The handler answers 200 only after that commit, so a
// provider retries what was not recorded.
//
// An event is linked to its mail by the provider's message id (the id the
// worker stored when the mail was sent) and, when the provider reports
// it, our own Message-ID header: mailspool show prints a mail's events.
package inbound

// Package bounce is mailspool's inbound SMTP listener for the mail that
// comes back to a VERP return path (package verp): delivery status
// notifications and complaint reports, which most relays send after they
// have accepted a mail instead of refusing it during the session.
//
// The listener (mailspool serve --smtp ADDR, built on
// github.com/emersion/go-smtp) accepts mail only for valid return paths
// (bounces+LANE.ID.MAC@DOMAIN: anything else is refused at RCPT TO with a
// 550), bounds a message's size (552 past it), and reads each message
// (Parse):
//
//   - an RFC 3464 delivery status notification (multipart/report;
//     report-type=delivery-status): each recipient's Action, Status and
//     Diagnostic-Code; only Action: failed counts (delayed, delivered,
//     relayed and expanded are ignored);
//   - an RFC 5965 ARF complaint (report-type=feedback-report), and
//     Microsoft's JMRP reports (the original with X-HmXmrOriginalRecipient);
//   - the common non-standard bounces (Exim's and qmail's plain text,
//     X-Failed-Recipients): the first SMTP reply of class 4 or 5 in the
//     notice, or a qmail "(#5.1.1)";
//   - automatic replies (Auto-Submitted, vacation and out-of-office
//     notices) and anything else: accepted and ignored.
//
// Each failed recipient's result is classified by package classify, and
// the classification's scope decides: only a permanent failure of
// recipient scope suppresses (a hard bounce), whatever the status code
// says; a failure about our sender is recorded as blocked, a 4.x.x as a
// soft bounce. A complaint (ARF abuse, fraud, virus, other) suppresses.
// The suppressed address is always the mail's own recipient, read from the
// queue by the return path's lane and id, never an address the report
// names: a report can only speak about the mail it came back for, even
// when the receiver strips the original headers.
//
// Events go to the events table (package inbound; provider "dsn" or
// "arf"), deduplicated by return path, recipient, type and status: the same
// bounce delivered twice is one event. The listener answers 250 only after
// the transaction that records them has committed; a database failure is a
// 451 and the sender retries.
package bounce

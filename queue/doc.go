// Package queue is the mailspool core: a mail queue kept in a table of the
// application's own database (MySQL/MariaDB or SQLite).
//
// The application enqueues a rendered [transport.Message] with
// [Queue.Enqueue] inside the same transaction as its business write, and
// returns. A [Worker] claims due rows in small batches under a lease, sends
// each through a [transport.Transport] outside any transaction, and records
// the outcomes with fenced statements that each cover many rows (one for a
// batch whose sends finish together; a slow send does not hold back the
// rows sent before it). What happens next is
// decided by one function, from transport.KindOf of the send error alone:
//
//	outcome      row becomes
//	Sent         sent(2), provider message id and sent time stored
//	Permanent    failed(4) at once; never retried
//	Temporary    retry(3) after Schedule[attempt] + up to 20% jitter (at least the
//	             provider's RetryAfter); failed(4) after MaxAttempts
//	Connection   retry(3) on the longer ConnectionSchedule; in a run of them
//	             (an outage) without spending an attempt, and they pause the
//	             lane's claiming (breaker); when the provider answers again,
//	             the mail they put off is due at once
//	(expired)    failed(4) with last_kind "expired" when NotAfter has passed
//
// States: pending(0) → sending(1) → sent(2) | retry(3) → ... | failed(4).
//
// # The next_run column
//
// One index, (status, next_run, id), serves every hot query, because
// next_run always holds the time at which the row next needs attention:
// for pending and retry rows the time it is due, for sending rows the end of
// the lease (so a row whose worker died becomes claimable again once
// next_run passes), and for sent and failed rows the time they finished
// (which the failure-rate and cleanup queries range over).
//
// # Leases and fencing
//
// A claim writes a fresh claim token into locked_by and the lease end into
// locked_until and next_run. Completion and release only touch rows that are
// still in sending with that token, so a worker whose lease expired and was
// taken over by another cannot overwrite the row; the rejected writes are
// counted and logged. The lease covers every send of the batch:
// SendTimeout × (rounds of Concurrency + 1 for the previous batch's sends
// still in flight) + LeaseMargin.
package queue

// Package queue is the mailspool core: a mail queue kept in a table of the
// application's own database (MySQL/MariaDB or SQLite).
//
// The application enqueues a rendered [transport.Message] with
// [Queue.Enqueue] inside the same transaction as its business write, and
// returns. A [Worker] claims due rows in small batches under a lease, sends
// each through a [transport.Transport] outside any transaction, and records
// the outcomes with fenced statements that each cover many rows (one for a
// batch whose sends finish together; a slow send does not hold back the
// rows sent before it). What happens next is decided by one function, the
// state machine in state.go, which also explains the attempt accounting:
//
//	outcome      row becomes
//	Sent         sent(2), provider message id and sent time stored
//	Permanent    failed(4) at once; never retried. Only with recipient or
//	             message scope: any other Permanent is taken as Temporary
//	Temporary    retry(3) after Schedule[attempt] + up to 20% jitter (at least the
//	             provider's RetryAfter); failed(4) after MaxAttempts
//	Connection   retry(3) on the longer ConnectionSchedule; in a run of them
//	             (an outage) without spending an attempt, and they pause the
//	             lane's claiming (breaker); when the provider answers again,
//	             the mail they put off is due at once
//	(expired)    failed(4) with last_kind "expired" when NotAfter has passed
//	(lease lost) back to pending/retry with the attempt given back, a crash
//	             counted and maybe_delivered set; failed(4) "poison" after 3
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
// # Leases, heartbeat and rescue
//
// A claim writes a fresh claim token into locked_by and the lease end
// (now + LeaseMargin) into locked_until and next_run. While a worker has
// sends in flight or outcomes not yet written, a heartbeat renews its leases
// every third of LeaseMargin. Outcomes are kept in memory and retried until
// they are written, so a database pause (a table lock, a long write
// transaction, a restart) delays the bookkeeping but re-sends nothing; only
// after FailAfter of nothing but failures does Run give up and return an
// error.
//
// Completion, release and renewal only touch rows that are still in
// sending with the worker's token, so a worker whose lease was taken over
// cannot overwrite the row; the rejected writes are counted and logged.
// Leases are taken over by the rescuer, a periodic statement of every
// worker apart from the claim (claims read only pending and retry rows): it
// returns rows whose lease expired (their worker died) to pending or retry.
// It takes a lease whole or not at all, skips leases some of whose rows
// another session holds, and after the database was slow or failing waits
// LeaseMargin, so that live owners renew first. A killed worker's rows are
// due again within 2 × LeaseMargin + RescueInterval (45 s by default): a
// lease ends LeaseMargin after its last heartbeat and must then stay
// expired for another LeaseMargin before it is rescued.
package queue

// Package bench is the engine of "mailspool bench": it enqueues mail the
// way an application does (one transaction per mail, through
// queue.Enqueue), drains it with real workers (queue.NewWorker(...).Run,
// in goroutines or in child "mailspool bench-worker" processes) through
// the fake transport or an in-process SMTP server, and checks that every
// mail was delivered exactly once.
//
// Deliveries are tracked by Message-ID on the transport side: each mail is
// enqueued with a Message-ID of its own, and the transport reports every
// accepted send (from a child process, as a line on its standard output).
// A mail never delivered is lost, a second delivery is a duplicate, and a
// delivered mail whose row is not marked sent is unrecorded; any of them
// makes the run fail. The database's own view (rows in sent) is checked
// beside it, never instead of it.
//
// Claim latency is timed at the driver: in a worker's connection pool the
// only explicit transaction is the claim (completions are single
// statements), so every transaction there, begin to commit, is one claim.
// Deadlocks are counted at the driver too, as the server reports them
// (MySQL error 1213), whether or not the worker retries or logs them.
//
// For comparison, the same run can drive a baseline: the claim-and-ack
// protocol of a plain "UPDATE ... WHERE id IN (SELECT ... ORDER BY id
// LIMIT 20)" claim with one autocommit acknowledgement per mail, on a table
// of its own ("classic", see classic.go).
package bench

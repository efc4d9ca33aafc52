// Package throttle keeps send limits per recipient domain, provider and
// lane that every worker process shares through the queue's own database,
// on the database's clock: a GCRA rate (one theoretical arrival time per
// key, taken with one conditional UPDATE, several sends at once for a
// batch) and a concurrency semaphore of expiring slot leases, so that a
// killed worker's slots come back when their lease ends. Replies that say
// a receiver wants less (Gmail's 4.7.28, Yahoo's TSS04, HTTP 429...) lower
// a key's rate for a while (Rules), recovering gradually.
//
// It hooks into a lane through queue.Throttle (Policy.Throttle): rows of a
// key without budget are deferred inside the claim, so that they hold no
// claim or worker slot, and each send takes its budget just before it
// starts and gives its slot back when it returns.
//
// docs/THROTTLING.md describes the model and the defaults.
package throttle

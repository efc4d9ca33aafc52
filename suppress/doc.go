// Package suppress is mailspool's suppression list: the addresses that
// must not receive mail, in one table per database (mailspool_suppressions),
// shared by every lane.
//
// An entry is an address, normalized the way the per-recipient limits
// normalize it (Normalize), a scope ("all", or one lane's name), a reason
// (hard_bounce, complaint, unsubscribe, manual, invalid), a source (the
// mail, provider event or operator it came from), when it was made and
// when it expires (never, by default).
//
// The list is fed by evidence about one recipient only: a permanent
// failure whose scope is the recipient (never the sender, the message, the
// lane or a transient condition: a reputation block of our own IP says
// nothing about the address), a provider's hard bounce or complaint event
// (package inbound), and the operator (mailspool suppress add|import).
// Soft bounces never suppress. A lane's Policy says which reasons suppress,
// for how long, and whether the lane checks the list at all.
//
// The queue checks the list twice, through the hook a lane carries
// (List.Screen, or List.BulkScreen for a lane with lists): at enqueue,
// where a suppressed recipient is refused with queue.ErrSuppressed, and
// inside the claim's transaction, where a mail whose recipient was
// suppressed while it waited fails with kind "suppressed" (or waits, under
// Policy.Hold) instead of being sent, unless it was enqueued past the list
// (queue.BypassSuppression, recorded in BypassTable). The policy is all
// here; the queue writes the row transition the hook answers.
package suppress

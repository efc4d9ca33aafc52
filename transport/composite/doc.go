// Package composite sends a lane's mail through several transports: in
// order (failover) or spread by weight (roundrobin), routing each outcome
// by its kind and scope rather than treating every error as "this
// provider is dead".
//
//	failover(ses://us-east-1, sendgrid://?api_key_env=SG_KEY)
//	roundrobin(smtp://a.example:587, smtp://b.example:587; weights=3,1; probe=30s)
//
// A member that fails for the connection, the lane or our sender is
// marked down in a Health shared by every worker process (SQL, on the
// queue's database: table mailspool_members) and the mail goes through
// the next member at once; a verdict about the recipient or the message
// is the mail's and no other member is tried; a mail that may have been
// delivered is never sent through another member. When a member's probe
// is due, a single send (the half-open probe) tries it again. See
// docs/TRANSPORTS.md for the routing table.
package composite

// Package mailaddr decides when two addresses are one mailbox.
//
// An address arrives in many spellings that a mail server delivers to the
// same mailbox: a domain in upper case or fullwidth letters, with an
// ideographic full stop (U+3002) for a dot, as an A-label
// ("xn--bcher-kva.example") or a U-label ("bücher.example"), or with an
// invisible character (a zero-width space, a soft hyphen, a byte-order
// mark) that a mail system may strip before delivery. Rate limits, the
// lookup of mail by recipient and the suppression list must see all of them
// as one address, or each spelling is a new recipient that passes them.
//
// [Normalize] gives the form an address is stored in: the domain mapped
// per UTS #46 with the lookup profile of golang.org/x/net/idna (case
// folded, compatibility characters mapped, NFC, every full stop a dot,
// disallowed code points refused) and written as U-labels, the local part
// as written. [Key] gives the form two addresses are compared in: the
// normalized address with its local part case-folded as well (the local
// part is the receiving server's to interpret, but no provider in use
// delivers by its case, and a limit that case could evade is no limit).
// Both refuse format characters (Unicode category Cf) anywhere in the
// address.
//
// The package imports the standard library and golang.org/x/net/idna only,
// so the queue and the suppression list can share it.
package mailaddr

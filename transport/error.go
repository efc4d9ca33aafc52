package transport

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// Kind is the normalized outcome of one delivery attempt. Kinds are stored by
// name (see [Kind.String]), never by number, so the list may only grow.
//
// The zero Kind is Temporary: an [Error] built without a kind means "try
// again", never a success or a drop, as [KindOf] treats any unclassified
// error.
type Kind uint8

const (
	// Temporary means the attempt failed but a later one may succeed
	// (SMTP 4xx, HTTP 429 and 5xx, throttling, unknown errors). It is the
	// zero Kind.
	Temporary Kind = iota
	// Sent means the provider accepted the mail. KindOf(nil) is Sent.
	Sent
	// Permanent means the mail will never be accepted as it is
	// (550 5.1.1 no such user, 553 bad address, a rejected message).
	// The queue never retries it.
	Permanent
	// Connection means the provider could not be reached or refused us, not
	// the mail: DNS, refused, timeouts before the mail was handed over, TLS,
	// authentication and account or setup problems. The mail was not
	// delivered and is fine; the queue retries it on a longer schedule.
	Connection
)

var kindNames = [...]string{Temporary: "temporary", Sent: "sent", Permanent: "permanent", Connection: "connection"}

// String returns the stored name of k: "temporary", "sent", "permanent" or
// "connection".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Scope is what a classified failure is about. Scopes are stored by name
// (see [Scope.String]), never by number, so the list may only grow.
//
// A Permanent failure needs evidence about the recipient or the message:
// a failure of any other scope is retried (and, for ScopeSender, alerted
// on), never dropped at once.
//
// The zero Scope is ScopeTransient, as the zero Kind is Temporary.
type Scope uint8

const (
	// ScopeTransient is about now: greylisting, a rate, a busy server, an
	// unknown error. It is the zero Scope.
	ScopeTransient Scope = iota
	// ScopeRecipient is about this address: no such user, a disabled
	// mailbox, a domain without a mail server, a full mailbox when final.
	ScopeRecipient
	// ScopeMessage is about this content: too large, malformed, a virus,
	// a content policy that rejects this message.
	ScopeMessage
	// ScopeSender is about us as a sender: our account, sending domain,
	// envelope sender, relay policy or IP reputation. Every mail of the
	// lane likely fails alike until an operator acts: it raises the lane's
	// alert.
	ScopeSender
	// ScopeLane is about the connection or the provider as a whole:
	// refused, DNS, TLS, authentication. It feeds the lane's breaker.
	ScopeLane
)

var scopeNames = [...]string{ScopeTransient: "transient", ScopeRecipient: "recipient", ScopeMessage: "message", ScopeSender: "sender", ScopeLane: "lane"}

// String returns the stored name of s: "transient", "recipient",
// "message", "sender" or "lane".
func (s Scope) String() string {
	if int(s) < len(scopeNames) {
		return scopeNames[s]
	}
	return "scope(" + strconv.Itoa(int(s)) + ")"
}

// ParseScope returns the Scope whose stored name is name.
func ParseScope(name string) (Scope, error) {
	for s, n := range scopeNames {
		if n == name {
			return Scope(s), nil
		}
	}
	return 0, errors.New("transport: unknown scope " + strconv.Quote(name) + " (want recipient, message, sender, transient or lane)")
}

// ScopeOf returns what a failure is about: the Scope of the first
// [*Error] in err's chain, and ScopeTransient for nil and any other error
// (as [KindOf] makes it Temporary).
func ScopeOf(err error) Scope {
	var e *Error
	if errors.As(err, &e) {
		return e.Scope
	}
	return ScopeTransient
}

// Error is a classified delivery failure. Adapters return it (usually built
// by package classify) wrapped or bare; [KindOf] finds it anywhere in an
// error chain.
//
// Error's text is short and safe to store: adapters must not put credentials
// in Detail or in Err.
type Error struct {
	Kind Kind
	// Code is the SMTP basic reply code (e.g. 421) or the HTTP status (e.g.
	// 429); 0 when there was no reply.
	Code int
	// Enhanced is the RFC 3463 enhanced status code, e.g. "5.1.1"; empty when
	// the server gave none.
	Enhanced string
	// RetryAfter is the provider's hint of when to try again; 0 when none.
	RetryAfter time.Duration
	// MaybeDelivered reports that the mail was fully handed over (the SMTP
	// DATA terminator or the whole HTTP request body was sent) before the
	// failure, so the provider may have accepted it. Retrying may duplicate.
	MaybeDelivered bool
	// Scope is what the failure is about: this recipient, this message,
	// our sender, the moment, or the lane as a whole. Only a failure of
	// Kind Connection and ScopeLane counts toward the lane's breaker; only
	// ScopeRecipient may ever suppress an address.
	Scope Scope
	// Rule names the classification rule that decided Kind: a built-in
	// rule of package classify or of the adapter (e.g. "smtp-auth",
	// "ses-MessageRejected"), or an operator's rule ("operator:NAME").
	// Empty when the error was built without one.
	Rule string
	// Detail is a short human-readable explanation: the server's reply text
	// or the provider's error message.
	Detail string
	// Err is the underlying cause, if any.
	Err error
}

// Error returns "<kind>: <code> <enhanced> <detail>: <cause>", leaving out
// empty parts, and the cause when a reply code and its text are given.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Kind.String())
	sep := ": "
	if e.Code != 0 {
		b.WriteString(sep)
		b.WriteString(strconv.Itoa(e.Code))
		sep = " "
	}
	if e.Enhanced != "" {
		b.WriteString(sep)
		b.WriteString(e.Enhanced)
		sep = " "
	}
	if e.Detail != "" {
		b.WriteString(sep)
		b.WriteString(e.Detail)
	}
	if e.MaybeDelivered {
		b.WriteString(" (maybe delivered)")
	}
	// A reply's text is already the Detail; the library error around it
	// would only repeat it. Without a reply code the cause says what failed.
	if e.Err != nil && (e.Code == 0 || e.Detail == "") {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// MemberOf returns the member of a composite transport (package
// transport/composite) that gave err: the SentVia of the first error in
// err's chain that has that method, or "".
func MemberOf(err error) string {
	var v interface{ SentVia() string }
	if errors.As(err, &v) {
		return v.SentVia()
	}
	return ""
}

// KindOf returns the outcome an error stands for: Sent for nil, the Kind of
// the first [*Error] in err's chain, and Temporary for any other error.
func KindOf(err error) Kind {
	if err == nil {
		return Sent
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Temporary
}

package transport

import (
	"context"
	"errors"
)

// Transport hands one message at a time to a mail provider.
//
// Send makes exactly one delivery attempt: it never retries (the queue owns
// retries), honours ctx (a cancelled or expired context makes it return
// promptly), and is safe for concurrent use. A nil error means the provider
// accepted the mail; any other error is classified by [KindOf].
//
// Close releases connections; it is idempotent, and Send after Close fails
// without an attempt, as Connection with [ErrClosed] in the error chain.
type Transport interface {
	Send(ctx context.Context, m *Message) (Receipt, error)
	Close() error
}

// Receipt describes an accepted mail.
type Receipt struct {
	// MessageID is the provider's id for the accepted mail: the Message-ID
	// header for SMTP, the SES MessageId, the SendGrid X-Message-Id. It is
	// what an operator searches for in the provider's delivery logs.
	MessageID string
	// Response is the provider's short acceptance text, when it gives one
	// (for SMTP the 250 reply, e.g. "2.0.0 OK: queued as 4Zx9"); may be empty.
	Response string
	// Member names the member of a composite transport (package
	// transport/composite) that accepted the mail; empty otherwise.
	Member string
}

// ErrClosed is in the chain of the error every adapter's Send returns after
// Close. The error's Kind is Connection: the mail is fine.
var ErrClosed = errors.New("transport: Send after Close")

package transport

import "context"

type maybeDeliveredKey struct{}

// WithMaybeDelivered returns ctx marked as the send of a mail that may
// already have been delivered by an earlier attempt (its row is marked
// maybe_delivered). The queue's worker sends with it; a transport that
// chooses among providers (package transport/composite) uses it to send
// such a mail only through the provider that may have it already.
func WithMaybeDelivered(ctx context.Context) context.Context {
	return context.WithValue(ctx, maybeDeliveredKey{}, true)
}

// MaybeDeliveredBefore reports whether ctx was marked by WithMaybeDelivered.
func MaybeDeliveredBefore(ctx context.Context) bool {
	v, _ := ctx.Value(maybeDeliveredKey{}).(bool)
	return v
}

package queue

import (
	"context"
	"time"

	"github.com/mailspool/mailspool/transport"
)

// SendNowTimeout is SendNow's default bound.
const SendNowTimeout = 3 * time.Second

// SendNow sends m through tr at once, bypassing the queue: for an
// operator's "send a test mail" button, which must show the real outcome
// (receipt, or the classified error: transport.KindOf, *transport.Error).
// It validates m first, and gives up after SendNowTimeout unless ctx ends
// sooner. Never use it on a request path that a user waits on.
func SendNow(ctx context.Context, tr transport.Transport, m *transport.Message) (transport.Receipt, error) {
	if err := m.Validate(); err != nil {
		return transport.Receipt{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, SendNowTimeout)
	defer cancel()
	return tr.Send(ctx, m)
}

package suppress

import (
	"strings"

	"github.com/mailspool/mailspool/transport"
)

// recipientScope reports whether te is a verdict about the recipient
// itself. Until transport.Error carries the classifier's scope, it is the
// RFC 3463 addressing status of a permanent reply (5.1.x: bad mailbox, bad
// destination system, bad address syntax, ...): the one class of enhanced
// codes that is about the address and nothing else. A bare 550 without an
// enhanced code is not enough.
func recipientScope(te *transport.Error) bool {
	return strings.HasPrefix(te.Enhanced, "5.1.")
}

package inbound

import (
	"strings"
	"time"

	"github.com/mailspool/mailspool/suppress"
)

// Providers, as stored in the provider column.
const (
	SES      = "ses"
	SendGrid = "sendgrid"
)

// Event types, as stored. Each provider's own names map onto these.
const (
	Delivered        = "delivered"
	Bounced          = "bounced"      // a hard bounce: SES Permanent, SendGrid bounce of type bounce
	SoftBounced      = "soft_bounced" // SES Transient
	BounceUnknown    = "bounce_undetermined"
	Blocked          = "blocked" // SendGrid bounce of type blocked: usually about the sender, not the address
	Dropped          = "dropped"
	Deferred         = "deferred" // SendGrid deferred, SES DeliveryDelay
	Complained       = "complained"
	Unsubscribed     = "unsubscribed"
	GroupUnsubscribe = "group_unsubscribed"
	Rejected         = "rejected" // SES Reject: the message (a virus), not the address
)

// Event is one thing a provider reports about one recipient of one mail.
type Event struct {
	Provider string `json:"provider"`
	// EventID is the provider's id of the event, unique per provider:
	// SendGrid's sg_event_id; for SES the SNS MessageId and the recipient.
	EventID string `json:"event_id"`
	Type    string `json:"type"`
	// Recipient is the address the event is about.
	Recipient string `json:"recipient"`
	// ProviderMessageID is the provider's id of the mail: what the worker
	// stored as its provider id when it was sent.
	ProviderMessageID string `json:"provider_message_id,omitempty"`
	// MessageID is our Message-ID header, when the provider reports it.
	MessageID string    `json:"message_id,omitempty"`
	Time      time.Time `json:"time"`
	// Detail is the provider's reason as it gave it: bounce type and
	// subtype, status, diagnostic text.
	Detail string `json:"detail,omitempty"`
	// Lane and MailID are the mail the event is about, found by its
	// provider message id when the event arrived (Options.Link); empty
	// when no lane's mail has that id.
	Lane   string `json:"lane,omitempty"`
	MailID int64  `json:"mail_id,omitempty"`
	// ReceivedAt is when mailspool recorded the event (set when read back).
	ReceivedAt time.Time `json:"received_at,omitzero"`
	// Suppress is the reason the event suppresses its recipient for; ""
	// when it does not.
	Suppress suppress.Reason `json:"-"`
}

// maxDetail is the size of the detail column.
const maxDetail = 512

// clip cuts s to n bytes at a rune boundary, and makes it one line.
func clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' || r == '\t' || r == 0 {
			return ' '
		}
		return r
	}, s)
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// bareID strips the angle brackets of a Message-ID header.
func bareID(s string) string {
	return strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(s), "<"), ">")
}

package inbound

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mailspool/mailspool/suppress"
)

// sesNotification is an SES notification, in either format: identity
// notifications (notificationType) or event publishing (eventType).
type sesNotification struct {
	NotificationType string `json:"notificationType"`
	EventType        string `json:"eventType"`
	Mail             struct {
		MessageID     string   `json:"messageId"`
		Destination   []string `json:"destination"`
		CommonHeaders struct {
			MessageID string `json:"messageId"`
		} `json:"commonHeaders"`
	} `json:"mail"`
	Bounce *struct {
		BounceType        string         `json:"bounceType"`
		BounceSubType     string         `json:"bounceSubType"`
		BouncedRecipients []sesRecipient `json:"bouncedRecipients"`
		Timestamp         string         `json:"timestamp"`
	} `json:"bounce"`
	Complaint *struct {
		ComplainedRecipients  []sesRecipient `json:"complainedRecipients"`
		ComplaintFeedbackType string         `json:"complaintFeedbackType"`
		ComplaintSubType      string         `json:"complaintSubType"`
		Timestamp             string         `json:"timestamp"`
	} `json:"complaint"`
	Delivery *struct {
		Recipients []string `json:"recipients"`
		Timestamp  string   `json:"timestamp"`
		SMTP       string   `json:"smtpResponse"`
	} `json:"delivery"`
	Reject *struct {
		Reason string `json:"reason"`
	} `json:"reject"`
	DeliveryDelay *struct {
		DelayType         string         `json:"delayType"`
		DelayedRecipients []sesRecipient `json:"delayedRecipients"`
		Timestamp         string         `json:"timestamp"`
	} `json:"deliveryDelay"`
}

type sesRecipient struct {
	EmailAddress   string `json:"emailAddress"`
	Action         string `json:"action"`
	Status         string `json:"status"`
	DiagnosticCode string `json:"diagnosticCode"`
}

func (r sesRecipient) detail(prefix ...string) string {
	return strings.Join(nonEmpty(append(prefix, r.Status, r.DiagnosticCode)...), " ")
}

// maxEventID is the size of the event_id column, which on MySQL holds
// ASCII only.
const maxEventID = 191

// sesEventID identifies the event about addr in the SNS message snsID:
// snsID/addr in lower case, or snsID/ and a hash of it when that would not
// fit the column as it is (too long, or not ASCII). Cut short or turned
// into ?, two long addresses that begin alike would have one id, and the
// second's bounce would be dropped as a duplicate.
func sesEventID(snsID, addr string) string {
	addr = strings.ToLower(addr)
	id := snsID + "/" + addr
	if len(id) <= maxEventID && strings.IndexFunc(id, func(r rune) bool { return r >= utf8.RuneSelf }) < 0 {
		return id
	}
	sum := sha256.Sum256([]byte(addr))
	return snsID + "/sha256:" + hex.EncodeToString(sum[:16])
}

// parseSES turns the Message of a verified SNS notification into one
// event per recipient the notification names. snsID is the SNS
// MessageId, which with the recipient identifies each event; at is the
// notification's time, used where the SES part has none.
func parseSES(message, snsID string, at time.Time) ([]Event, error) {
	var n sesNotification
	if err := json.Unmarshal([]byte(message), &n); err != nil {
		return nil, fmt.Errorf("the SNS Message is not an SES notification: %w", err)
	}
	kind := n.NotificationType
	if kind == "" {
		kind = n.EventType
	}
	base := Event{Provider: SES, ProviderMessageID: n.Mail.MessageID, MessageID: bareID(n.Mail.CommonHeaders.MessageID)}
	var out []Event
	add := func(addr, typ, detail, ts string, reason suppress.Reason) {
		e := base
		e.Recipient, e.Type, e.Detail, e.Suppress = addr, typ, detail, reason
		e.EventID = sesEventID(snsID, addr)
		e.Time = at
		if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			e.Time = t.UTC()
		}
		out = append(out, e)
	}
	switch kind {
	case "Bounce":
		b := n.Bounce
		if b == nil {
			return nil, fmt.Errorf("a Bounce notification without bounce")
		}
		typ, reason := SoftBounced, suppress.Reason("")
		switch b.BounceType {
		case "Permanent":
			typ, reason = Bounced, suppress.HardBounce
		case "Transient":
		default: // Undetermined
			typ = BounceUnknown
		}
		for _, r := range b.BouncedRecipients {
			add(r.EmailAddress, typ, r.detail(b.BounceType, b.BounceSubType), b.Timestamp, reason)
		}
	case "Complaint":
		c := n.Complaint
		if c == nil {
			return nil, fmt.Errorf("a Complaint notification without complaint")
		}
		switch c.ComplaintFeedbackType {
		case "not-spam", "auth-failure":
			// The recipient said it is not spam, or the report is about
			// the sender's authentication: no complaint, none counted in
			// the lane's complaint rate (as the bounce listener's ARF).
			return nil, nil
		}
		for _, r := range c.ComplainedRecipients {
			add(r.EmailAddress, Complained, strings.Join(nonEmpty(c.ComplaintFeedbackType, c.ComplaintSubType), " "), c.Timestamp, suppress.Complaint)
		}
	case "Delivery":
		if n.Delivery == nil {
			return nil, fmt.Errorf("a Delivery notification without delivery")
		}
		for _, r := range n.Delivery.Recipients {
			add(r, Delivered, n.Delivery.SMTP, n.Delivery.Timestamp, "")
		}
	case "DeliveryDelay":
		d := n.DeliveryDelay
		if d == nil {
			return nil, fmt.Errorf("a DeliveryDelay notification without deliveryDelay")
		}
		for _, r := range d.DelayedRecipients {
			add(r.EmailAddress, Deferred, r.detail(d.DelayType), d.Timestamp, "")
		}
	case "Reject":
		// A rejected message (a virus) is about the message: every
		// destination gets its event, none is suppressed.
		reason := ""
		if n.Reject != nil {
			reason = n.Reject.Reason
		}
		for _, r := range n.Mail.Destination {
			add(r, Rejected, reason, "", "")
		}
	default:
		// Send, Open, Click, Rendering Failure, Subscription: nothing to
		// learn about an address.
	}
	return out, nil
}

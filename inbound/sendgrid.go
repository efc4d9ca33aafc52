package inbound

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mailspool/mailspool/suppress"
)

// The SendGrid Event Webhook's signature headers.
const (
	sendGridSignatureHeader = "X-Twilio-Email-Event-Webhook-Signature"
	sendGridTimestampHeader = "X-Twilio-Email-Event-Webhook-Timestamp"
)

// ParseSendGridKey reads the Event Webhook's verification key as SendGrid
// shows it (base64 of the DER public key; PEM is accepted too) and checks
// that it is an ECDSA P-256 key: anything else is an error here, when the
// config loads, never a failure (or a panic) when a post arrives.
func ParseSendGridKey(s string) (*ecdsa.PublicKey, error) {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "-----BEGIN PUBLIC KEY-----")
	s = strings.TrimSuffix(s, "-----END PUBLIC KEY-----")
	s = strings.Join(strings.Fields(s), "")
	if s == "" {
		return nil, errors.New("inbound: the SendGrid verification key is empty")
	}
	der, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("inbound: the SendGrid verification key is not base64 (copy it from Settings > Mail Settings > Event Webhook > Signature Verification)")
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("inbound: the SendGrid verification key is not a public key: %w", err)
	}
	key, ok := pub.(*ecdsa.PublicKey)
	if !ok || key.Curve != elliptic.P256() {
		return nil, fmt.Errorf("inbound: the SendGrid verification key is a %T, not an ECDSA P-256 key", pub)
	}
	return key, nil
}

// verifySendGrid checks a post's signature headers against key and the
// time window; the error is what the 4xx says.
func verifySendGrid(key *ecdsa.PublicKey, sigHeader, tsHeader string, body []byte, now time.Time, window time.Duration) error {
	if sigHeader == "" || tsHeader == "" {
		return errors.New("missing " + sendGridSignatureHeader + " or " + sendGridTimestampHeader)
	}
	ts, err := strconv.ParseInt(tsHeader, 10, 64)
	if err != nil {
		return errors.New("the timestamp header is not unix seconds")
	}
	if d := now.Sub(time.Unix(ts, 0)); d > window || d < -window {
		return fmt.Errorf("the timestamp is %s away from now, outside the %s window", d.Round(time.Second), window)
	}
	sig, err := base64.StdEncoding.DecodeString(sigHeader)
	if err != nil {
		return errors.New("the signature is not base64")
	}
	h := sha256.New()
	h.Write([]byte(tsHeader))
	h.Write(body)
	if !ecdsa.VerifyASN1(key, h.Sum(nil), sig) {
		return errors.New("the signature does not match")
	}
	return nil
}

// sendGridEvent is one element of the Event Webhook's JSON array.
type sendGridEvent struct {
	Email       string          `json:"email"`
	Timestamp   json.Number     `json:"timestamp"`
	Event       string          `json:"event"`
	EventID     string          `json:"sg_event_id"`
	MessageID   string          `json:"sg_message_id"`
	SMTPID      string          `json:"smtp-id"`
	Type        string          `json:"type"` // bounce: "bounce" or "blocked"
	Reason      string          `json:"reason"`
	Response    string          `json:"response"`
	Status      string          `json:"status"`
	ASMGroupID  json.RawMessage `json:"asm_group_id"`
	BounceClass string          `json:"bounce_classification"`
}

// kind is the type of event r is recorded as, and what it suppresses; ""
// for an event not recorded: processed, open, click, group_resubscribe,
// the account's events (which name no recipient), types added later.
func (r sendGridEvent) kind() (string, suppress.Reason) {
	switch r.Event {
	case "delivered":
		return Delivered, ""
	case "bounce":
		if r.Type == "blocked" {
			return Blocked, "" // SendGrid's "blocked": a refusal about the sender or content, not the address
		}
		return Bounced, suppress.HardBounce
	case "dropped":
		return Dropped, ""
	case "deferred":
		return Deferred, ""
	case "spamreport":
		return Complained, suppress.Complaint
	case "unsubscribe":
		return Unsubscribed, suppress.Unsubscribe
	case "group_unsubscribe":
		return GroupUnsubscribe, suppress.Unsubscribe
	}
	return "", ""
}

// kept reports whether an event of r's type is recorded at all.
func (r sendGridEvent) kept() bool {
	typ, _ := r.kind()
	return typ != ""
}

// parseSendGrid turns a verified post into events. An event not recorded
// is passed over whatever it lacks or holds: refusing the post for it
// would make SendGrid send the whole post again and again, until it gives
// up the events recorded beside it too.
func parseSendGrid(body []byte) ([]Event, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("not a JSON array of events: %w", err)
	}
	var out []Event
	for i, ev := range raw {
		var r sendGridEvent
		if err := json.Unmarshal(ev, &r); err != nil {
			var kind struct {
				Event string `json:"event"`
			}
			if json.Unmarshal(ev, &kind) == nil && !(sendGridEvent{Event: kind.Event}).kept() {
				continue // not an event kept, whatever its shape
			}
			return nil, fmt.Errorf("event %d: %w", i+1, err)
		}
		var e Event
		if e.Type, e.Suppress = r.kind(); e.Type == "" {
			continue
		}
		if r.EventID == "" || r.Email == "" {
			return nil, fmt.Errorf("event %d (%s): sg_event_id and email are required", i+1, r.Event)
		}
		secs, err := r.Timestamp.Int64()
		if err != nil {
			return nil, fmt.Errorf("event %d: timestamp %q is not unix seconds", i+1, r.Timestamp)
		}
		e.Provider, e.EventID, e.Recipient, e.Time, e.MessageID = SendGrid, r.EventID, r.Email, time.Unix(secs, 0).UTC(), bareID(r.SMTPID)
		// sg_message_id is the X-Message-Id the API answered the send
		// with (the provider id the worker stored), then ".filter...".
		e.ProviderMessageID, _, _ = strings.Cut(r.MessageID, ".")
		e.Detail = strings.TrimSpace(strings.Join(nonEmpty(r.Type, r.Status, r.BounceClass, r.Reason, r.Response), " "))
		out = append(out, e)
	}
	return out, nil
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

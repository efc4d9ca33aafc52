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

// parseSendGrid turns a verified post into events.
func parseSendGrid(body []byte) ([]Event, error) {
	var raw []sendGridEvent
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("not a JSON array of events: %w", err)
	}
	var out []Event
	for i, r := range raw {
		if r.EventID == "" || r.Email == "" || r.Event == "" {
			return nil, fmt.Errorf("event %d: sg_event_id, email and event are required", i+1)
		}
		secs, err := r.Timestamp.Int64()
		if err != nil {
			return nil, fmt.Errorf("event %d: timestamp %q is not unix seconds", i+1, r.Timestamp)
		}
		e := Event{Provider: SendGrid, EventID: r.EventID, Recipient: r.Email, Time: time.Unix(secs, 0).UTC(), MessageID: bareID(r.SMTPID)}
		// sg_message_id is the X-Message-Id the API answered the send
		// with (the provider id the worker stored), then ".filter...".
		e.ProviderMessageID, _, _ = strings.Cut(r.MessageID, ".")
		detail := strings.TrimSpace(strings.Join(nonEmpty(r.Type, r.Status, r.BounceClass, r.Reason, r.Response), " "))
		e.Detail = detail
		switch r.Event {
		case "delivered":
			e.Type = Delivered
		case "bounce":
			if r.Type == "blocked" {
				e.Type = Blocked // SendGrid's "blocked": a refusal about the sender or content, not the address
			} else {
				e.Type, e.Suppress = Bounced, suppress.HardBounce
			}
		case "dropped":
			e.Type = Dropped
		case "deferred":
			e.Type = Deferred
		case "spamreport":
			e.Type, e.Suppress = Complained, suppress.Complaint
		case "unsubscribe":
			e.Type, e.Suppress = Unsubscribed, suppress.Unsubscribe
		case "group_unsubscribe":
			e.Type, e.Suppress = GroupUnsubscribe, suppress.Unsubscribe
		default:
			continue // processed, open, click, group_resubscribe: nothing to learn
		}
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

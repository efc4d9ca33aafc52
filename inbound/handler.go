package inbound

import (
	"context"
	"crypto/ecdsa"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/mailspool/mailspool/suppress"
)

// Options configure the handler. A provider whose options are nil is not
// served (404).
type Options struct {
	// SESTopics are the SNS topic ARNs whose messages are accepted;
	// messages of any other topic are refused before anything is fetched
	// (an attacker's own topic carries a valid signature). Empty: SES is
	// not served.
	SESTopics []string
	// SendGridKey is the Event Webhook's verification key
	// (ParseSendGridKey). nil: SendGrid is not served.
	SendGridKey *ecdsa.PublicKey
	// Window is how far a message's timestamp may be from now (default
	// 15 minutes, at most a day).
	Window time.Duration
	// MaxBody bounds a request body (default 4 MiB; SNS messages are at
	// most 256 KiB).
	MaxBody int64
	// Policy says how long what the events teach suppresses (the zero
	// Policy: until removed; Bypass is ignored here).
	Policy suppress.Policy
	// UnsubscribeScope is the lane an unsubscribe event suppresses its
	// recipient in, never "all" (CheckUnsubscribeScope); "" records
	// unsubscribes without suppressing.
	UnsubscribeScope string
	// Link, when not nil, finds the mails the events are about by their
	// provider message ids, so that each event is stored with its lane
	// and mail id (config.EventLinker). Events it cannot link are stored
	// all the same.
	Link LinkFunc
	// LinkByMessageID, when not nil, links an event Link did not by our
	// Message-ID header, when the provider reports it
	// (config.EventMessageLinker).
	LinkByMessageID LinkFunc
	// Logger receives a line per refused request (default slog.Default()).
	Logger *slog.Logger
	// ObserveFunc, when not nil, is called for each event recorded for
	// the first time, and RejectFunc for each refused request with the
	// provider and a short reason label (metrics).
	ObserveFunc func(e Event)
	RejectFunc  func(provider, reason string)
}

// DefaultWindow is the default Options.Window.
const DefaultWindow = 15 * time.Minute

// DefaultMaxBody is the default Options.MaxBody.
const DefaultMaxBody = 4 << 20

// Handler serves the provider webhooks; see the package documentation.
type Handler struct {
	store *Store
	opts  Options
	sns   *snsVerifier
	now   func() time.Time
	mux   *http.ServeMux
}

// NewHandler returns the webhook handler recording into db, where Migrate
// and suppress.Migrate have made their tables.
func NewHandler(db *sql.DB, opts Options) (*Handler, error) {
	if opts.Window == 0 {
		opts.Window = DefaultWindow
	}
	if opts.Window < 0 || opts.Window > 24*time.Hour {
		return nil, fmt.Errorf("inbound: window %v out of range (0, 24h]", opts.Window)
	}
	if opts.MaxBody == 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.MaxBody < 0 {
		return nil, fmt.Errorf("inbound: negative max body %d", opts.MaxBody)
	}
	if err := CheckUnsubscribeScope(opts.UnsubscribeScope); err != nil {
		return nil, err
	}
	for _, arn := range opts.SESTopics {
		if !strings.HasPrefix(arn, "arn:aws") || strings.Count(arn, ":") != 5 {
			return nil, fmt.Errorf("inbound: %q is not an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME)", arn)
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	store, err := OpenStore(db)
	if err != nil {
		return nil, err
	}
	h := &Handler{store: store, opts: opts, now: time.Now, mux: http.NewServeMux()}
	if len(opts.SESTopics) > 0 {
		h.sns = newSNSVerifier(opts.SESTopics, opts.Window)
		h.mux.HandleFunc("/webhooks/ses", h.serveSES)
	}
	if opts.SendGridKey != nil {
		h.mux.HandleFunc("/webhooks/sendgrid", h.serveSendGrid)
	}
	return h, nil
}

// ServeHTTP answers POST /webhooks/ses and /webhooks/sendgrid; anything
// else is a 404 or 405 that changes nothing.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}

// refuse answers a request that changes nothing.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, provider string, code int, label string, err error) {
	h.opts.Logger.Warn("webhook refused", "provider", provider, "status", code, "reason", label, "err", err, "remote", r.RemoteAddr)
	if h.opts.RejectFunc != nil {
		h.opts.RejectFunc(provider, label)
	}
	http.Error(w, provider+" webhook: "+err.Error(), code)
}

// readBody reads a POST's body within the bound; ok false means it
// answered.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request, provider string) ([]byte, bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.refuse(w, r, provider, http.StatusMethodNotAllowed, "method", errors.New("only POST"))
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		h.refuse(w, r, provider, http.StatusRequestEntityTooLarge, "too_large", fmt.Errorf("body over %d bytes", h.opts.MaxBody))
		return nil, false
	case err != nil:
		h.refuse(w, r, provider, http.StatusBadRequest, "read", err)
		return nil, false
	}
	return body, true
}

// save records evs and answers: 200 after the commit, 503 when the
// database failed (the provider retries).
func (h *Handler) save(w http.ResponseWriter, r *http.Request, provider string, evs []Event) {
	rec, err := h.store.record(r.Context(), evs, h.opts.Policy, h.opts.UnsubscribeScope, Links{ByProviderID: h.opts.Link, ByMessageID: h.opts.LinkByMessageID})
	if err != nil {
		h.opts.Logger.Error("webhook events not recorded", "provider", provider, "events", len(evs), "err", err)
		http.Error(w, provider+" webhook: the events could not be recorded; try again", http.StatusServiceUnavailable)
		return
	}
	if h.opts.ObserveFunc != nil {
		for _, e := range rec.fresh {
			h.opts.ObserveFunc(e)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]int{"events": len(evs), "new": rec.New, "duplicates": rec.Duplicates, "suppressed": rec.Suppressed})
}

func (h *Handler) serveSendGrid(w http.ResponseWriter, r *http.Request) {
	body, ok := h.readBody(w, r, SendGrid)
	if !ok {
		return
	}
	if err := verifySendGrid(h.opts.SendGridKey, r.Header.Get(sendGridSignatureHeader), r.Header.Get(sendGridTimestampHeader), body, h.now(), h.opts.Window); err != nil {
		h.refuse(w, r, SendGrid, http.StatusForbidden, "signature", err)
		return
	}
	evs, err := parseSendGrid(body)
	if err != nil {
		h.refuse(w, r, SendGrid, http.StatusBadRequest, "malformed", err)
		return
	}
	h.save(w, r, SendGrid, evs)
}

func (h *Handler) serveSES(w http.ResponseWriter, r *http.Request) {
	body, ok := h.readBody(w, r, SES)
	if !ok {
		return
	}
	var m snsMessage
	if err := json.Unmarshal(body, &m); err != nil {
		h.refuse(w, r, SES, http.StatusBadRequest, "malformed", fmt.Errorf("not an SNS message: %w", err))
		return
	}
	if err := h.sns.verify(r.Context(), &m, h.now()); err != nil {
		if errors.Is(err, errFetch) {
			h.opts.Logger.Error("webhook: the SNS signing certificate could not be fetched", "err", err)
			http.Error(w, "ses webhook: the signing certificate could not be fetched; try again", http.StatusServiceUnavailable)
			return
		}
		h.refuse(w, r, SES, http.StatusForbidden, "signature", err)
		return
	}
	switch m.Type {
	case "SubscriptionConfirmation":
		if err := h.sns.confirm(r.Context(), &m); err != nil {
			h.opts.Logger.Error("webhook: the SNS subscription could not be confirmed", "topic", m.TopicArn, "err", err)
			http.Error(w, "ses webhook: the subscription could not be confirmed; try again", http.StatusServiceUnavailable)
			return
		}
		h.opts.Logger.Info("webhook: SNS subscription confirmed", "topic", m.TopicArn)
		w.WriteHeader(http.StatusOK)
		return
	case "UnsubscribeConfirmation":
		h.opts.Logger.Warn("webhook: SNS says the subscription was removed", "topic", m.TopicArn)
		w.WriteHeader(http.StatusOK)
		return
	}
	ts, _ := time.Parse(time.RFC3339Nano, m.Timestamp) // verify checked it
	evs, err := parseSES(m.Message, m.MessageID, ts.UTC())
	if err != nil {
		h.refuse(w, r, SES, http.StatusBadRequest, "malformed", err)
		return
	}
	h.save(w, r, SES, evs)
}

// ForMail returns the events linked to a mail (Store.ForMail) on db.
func ForMail(ctx context.Context, db *sql.DB, providerID, messageID string) ([]Event, error) {
	s, err := OpenStore(db)
	if err != nil {
		return nil, err
	}
	return s.ForMail(ctx, providerID, messageID)
}

// CheckUnsubscribeScope says what is wrong with scope as
// Options.UnsubscribeScope: a lane name, or "" for none. An unsubscribe
// applies to one lane: one from a newsletter must never stop a password
// reset, so "all" is refused.
func CheckUnsubscribeScope(scope string) error {
	if scope == "" {
		return nil
	}
	if err := suppress.CheckScope(scope); err != nil {
		return err
	}
	if scope == suppress.ScopeAll {
		return fmt.Errorf("inbound: an unsubscribe applies to one lane, never %q: a newsletter's unsubscribe must not stop a password reset; name the lane", suppress.ScopeAll)
	}
	return nil
}

package bounce

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/mailspool/mailspool/classify"
	"github.com/mailspool/mailspool/inbound"
	"github.com/mailspool/mailspool/suppress"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/verp"
)

// Providers, as stored in the events table.
const (
	ProviderDSN = "dsn" // delivery status notifications and plain bounces
	ProviderARF = "arf" // complaint reports
)

// Mail is what the listener needs of the mail a return path names.
type Mail struct {
	Recipient  string
	MessageID  string // our Message-ID
	ProviderID string // the provider's id, once sent
}

// ErrNoMail is what Options.Mails returns for a mail that is not (or no
// longer) in the queue.
var ErrNoMail = errors.New("bounce: no such mail")

// Options configure the listener.
type Options struct {
	// Signer checks the return paths (required).
	Signer *verp.Signer
	// Mails returns the mail of lane with id, ErrNoMail when there is
	// none (required).
	Mails func(ctx context.Context, lane string, id int64) (Mail, error)
	// Policy, when not nil, returns a lane's suppression policy: which
	// reasons suppress and for how long (default: the zero Policy).
	Policy func(lane string) suppress.Policy
	// MaxSize bounds a message (default DefaultMaxSize).
	MaxSize int64
	// Logger gets a line per refused or failed message (default
	// slog.Default()).
	Logger *slog.Logger
	// ObserveFunc, when not nil, is called for each event recorded for
	// the first time (metrics).
	ObserveFunc func(inbound.Event)
	// TLSConfig, when not nil, makes the listener offer STARTTLS with it.
	// Senders that cannot use TLS still deliver in the clear, as SMTP
	// between servers allows: a bounce is worth more than its privacy.
	TLSConfig *tls.Config
}

// DefaultMaxSize is the default Options.MaxSize: a report carries the
// original mail, which may be large; most are truncated by their sender.
const DefaultMaxSize = 10 << 20

// maxRecipients bounds the return paths of one message.
const maxRecipients = 50

// NewServer returns the SMTP server recording what it receives into db
// (the events table and the suppression list must exist). Serve it on a
// listener with its Serve method; Close or Shutdown stops it.
func NewServer(db *sql.DB, opts Options) (*smtp.Server, error) {
	if opts.Signer == nil || opts.Mails == nil {
		return nil, errors.New("bounce: the listener needs the VERP signer and a way to find mails")
	}
	if opts.MaxSize == 0 {
		opts.MaxSize = DefaultMaxSize
	}
	if opts.MaxSize < 0 {
		return nil, fmt.Errorf("bounce: negative max size %d", opts.MaxSize)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	store, err := inbound.OpenStore(db)
	if err != nil {
		return nil, err
	}
	s := smtp.NewServer(&backend{opts: opts, store: store, now: time.Now})
	s.Domain = opts.Signer.Domain()
	s.MaxMessageBytes = opts.MaxSize
	s.MaxRecipients = maxRecipients
	s.ReadTimeout = 2 * time.Minute
	s.WriteTimeout = 2 * time.Minute
	s.MaxLineLength = 4000
	s.TLSConfig = opts.TLSConfig
	return s, nil
}

type backend struct {
	opts  Options
	store *inbound.Store
	now   func() time.Time
}

func (b *backend) NewSession(c *smtp.Conn) (smtp.Session, error) {
	return &session{b: b, remote: c.Conn().RemoteAddr().String()}, nil
}

type returnPath struct {
	lane string
	id   int64
}

type session struct {
	b      *backend
	remote string
	rcpts  []returnPath
}

func (s *session) Mail(string, *smtp.MailOptions) error { return nil } // bounces come from <>

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	lane, id, ok := s.b.opts.Signer.Parse(to)
	if !ok {
		s.b.opts.Logger.Warn("bounce listener: recipient refused", "remote", s.remote)
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such return path"}
	}
	s.rcpts = append(s.rcpts, returnPath{lane, id})
	return nil
}

func (s *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err // go-smtp answers 552 to a message over the size
	}
	err = s.b.record(context.Background(), s.rcpts, Parse(raw))
	if err == nil {
		return nil // 250: after the commits
	}
	s.b.opts.Logger.Error("bounce listener: not recorded; the sender will retry", "err", err)
	return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "not recorded, try again later"}
}

// record records what rep says about the mails of rps, one transaction
// per lane (each under its lane's policy). A failure leaves what was
// committed, which the sender's retry finds as duplicates.
func (b *backend) record(ctx context.Context, rps []returnPath, rep *Report) error {
	byLane := map[string][]returnPath{}
	var lanes []string
	for _, rp := range rps {
		if byLane[rp.lane] == nil {
			lanes = append(lanes, rp.lane)
		}
		byLane[rp.lane] = append(byLane[rp.lane], rp)
	}
	for _, lane := range lanes {
		evs, err := b.events(ctx, byLane[lane], rep)
		if err != nil {
			return err
		}
		var p suppress.Policy
		if b.opts.Policy != nil {
			p = b.opts.Policy(lane)
		}
		rec, err := b.store.RecordUnder(ctx, evs, p)
		if err != nil {
			return err
		}
		if b.opts.ObserveFunc != nil {
			for _, e := range rec.Fresh() {
				b.opts.ObserveFunc(e)
			}
		}
	}
	return nil
}

func (s *session) Reset()        { s.rcpts = nil }
func (s *session) Logout() error { return nil }

// events turns a report received at the return paths rps into events.
func (b *backend) events(ctx context.Context, rps []returnPath, rep *Report) ([]inbound.Event, error) {
	var out []inbound.Event
	now := b.now().UTC()
	for _, rp := range rps {
		m, err := b.opts.Mails(ctx, rp.lane, rp.id)
		found := err == nil
		if err != nil && !errors.Is(err, ErrNoMail) {
			return nil, err
		}
		base := inbound.Event{Recipient: m.Recipient, ProviderMessageID: m.ProviderID, MessageID: m.MessageID, Time: now}
		if found {
			// The mail it is about, from its return path: the complaint
			// counts for its lane (the lane's complaint rate).
			base.Lane, base.MailID = rp.lane, rp.id
		} else {
			base.MessageID = rep.OriginalMessageID
		}
		where := rp.lane + "/" + strconv.FormatInt(rp.id, 10)
		switch rep.Kind {
		case Complaint:
			e := base
			e.Provider, e.Type = ProviderARF, inbound.Complained
			e.Detail = "mail " + where + "; feedback type " + rep.FeedbackType
			if !complaintTypes[rep.FeedbackType] {
				continue // not-spam, auth-failure, or a type no standard defines
			}
			if found {
				e.Suppress = suppress.Complaint
			} else {
				e.Detail += "; the mail is no longer in the queue"
			}
			// One complaint per mail and recipient, whatever the type: a
			// recipient knows the return path of the mail they got and
			// could otherwise add a complaint per report to the lane's
			// complaint rate.
			e.EventID = eventID(where, e.Type, "", e.Recipient)
			if e.Recipient == "" {
				continue
			}
			out = append(out, e)
		case DSN, Plain:
			for _, r := range pick(rep.Recipients, m.Recipient) {
				e := base
				e.Provider = ProviderDSN
				if !found {
					e.Recipient = r.FinalRecipient
				}
				if e.Recipient == "" {
					continue
				}
				err := verdict(r)
				e.Type, e.Suppress = eventType(r, err)
				if !found {
					e.Suppress = "" // nothing to check the report's word against
				}
				e.Detail = detail(where, r, err, found)
				e.EventID = eventID(where, e.Type, r.Status, e.Recipient)
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// pick returns the failed recipients of a report that are about rcpt:
// those naming it, or the only one when none does (a forward, a rewrite).
func pick(rs []Recipient, rcpt string) []Recipient {
	var failed []Recipient
	for _, r := range rs {
		if r.Action == "failed" || r.Action == "" && strings.HasPrefix(r.Status, "5") {
			failed = append(failed, r)
		}
	}
	want, _ := suppress.Normalize(rcpt)
	var mine []Recipient
	for _, r := range failed {
		for _, a := range []string{r.FinalRecipient, r.OriginalRecipient} {
			if n, err := suppress.Normalize(a); err == nil && n == want && want != "" {
				mine = append(mine, r)
				break
			}
		}
	}
	if len(mine) == 0 && len(failed) == 1 {
		return failed
	}
	return mine
}

// verdict classifies one recipient's result: its Diagnostic-Code when
// it holds an SMTP reply, else its Status.
func verdict(r Recipient) error {
	d := strings.TrimSpace(r.Diagnostic)
	if len(d) >= 3 && (r.DiagnosticType == "smtp" || r.DiagnosticType == "") {
		if code, err := strconv.Atoi(d[:3]); err == nil && code >= 400 && code < 600 {
			text := strings.TrimLeft(d[3:], " -")
			enhanced := ""
			if !startsEnhanced(text) {
				enhanced = r.Status
			}
			return classify.SMTP(code, enhanced, text)
		}
	}
	code := 450
	if strings.HasPrefix(r.Status, "5") {
		code = 550
	}
	return classify.SMTP(code, r.Status, d)
}

func startsEnhanced(s string) bool {
	f := firstField(s)
	parts := strings.Split(f, ".")
	return len(parts) == 3 && (parts[0] == "4" || parts[0] == "5")
}

// eventType is the event a classified failure makes, and what it
// suppresses: only a permanent failure of recipient scope.
func eventType(r Recipient, err error) (string, suppress.Reason) {
	if reason, ok := suppress.FromFailure(err); ok {
		return inbound.Bounced, reason
	}
	var te *transport.Error
	errors.As(err, &te)
	switch {
	case te != nil && te.Scope == transport.ScopeSender:
		return inbound.Blocked, ""
	case strings.HasPrefix(r.Status, "4") || te != nil && te.Code >= 400 && te.Code < 500:
		return inbound.SoftBounced, ""
	}
	return inbound.BounceUnknown, ""
}

func detail(where string, r Recipient, err error, found bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "mail %s; status %s", where, r.Status)
	var te *transport.Error
	if errors.As(err, &te) {
		fmt.Fprintf(&b, "; %s %s (%s)", te.Kind, te.Scope, te.Rule)
	}
	if r.FinalRecipient != "" {
		fmt.Fprintf(&b, "; final recipient %s", r.FinalRecipient)
	}
	if r.Diagnostic != "" {
		fmt.Fprintf(&b, "; %s", r.Diagnostic)
	}
	if !found {
		b.WriteString("; the mail is no longer in the queue")
	}
	return b.String()
}

// eventID identifies an event for deduplication: the same result for the
// same mail and recipient is one event however often it is reported.
// complaintTypes are the ARF feedback types (RFC 5965) that say the
// recipient did not want the mail; not-spam says the opposite, and
// auth-failure (RFC 6591) is about the sender's authentication.
var complaintTypes = map[string]bool{"abuse": true, "fraud": true, "virus": true, "other": true}

func eventID(where, typ, status, rcpt string) string {
	n, err := suppress.Normalize(rcpt)
	if err != nil {
		n = rcpt
	}
	h := sha256.Sum256([]byte(typ + "\x00" + status + "\x00" + n))
	return where + "/" + hex.EncodeToString(h[:12])
}

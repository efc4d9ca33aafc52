package cli

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/mail"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mailspool/mailspool/attachment"
	"github.com/mailspool/mailspool/config"
	"github.com/mailspool/mailspool/internal/duration"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/transport"
)

// mailSpec is one mail as the enqueue command takes it, from flags or JSON:
//
//	{"from": "Shop <noreply@shop.example>", "to": "ann@example.com",
//	 "subject": "Welcome", "text": "...", "html": "...",
//	 "headers": [{"name": "List-Unsubscribe", "value": "<https://...>"}],
//	 "reply_to": "help@shop.example", "template": "welcome",
//	 "max_attempts": 1, "not_after": "2026-12-02T12:00:00Z", "delay": "10m",
//	 "idempotency_key": "order-42", "client_ip": "192.0.2.1", "priority": 9,
//	 "idempotency_scope": "invite-42" (instead of idempotency_key: once per scope and mailbox),
//	 "attachments": [{"path": "invoice.pdf"},
//	                 {"filename": "logo.png", "content": "<base64>", "content_type": "image/png", "content_id": "logo"}]}
type mailSpec struct {
	From     string       `json:"from"`
	To       string       `json:"to"`
	ReplyTo  string       `json:"reply_to,omitempty"`
	Subject  string       `json:"subject"`
	Text     string       `json:"text,omitempty"`
	HTML     string       `json:"html,omitempty"`
	Headers  []headerSpec `json:"headers,omitempty"`
	Template string       `json:"template,omitempty"`
	List     string       `json:"list,omitempty"`
	// MaxAttempts is 1..1000; nil means the lane's. A value given is
	// passed on as it is, so that 0 is refused as the config refuses it.
	MaxAttempts    *int   `json:"max_attempts,omitempty"`
	NotAfter       string `json:"not_after,omitempty"`
	Delay          string `json:"delay,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// IdempotencyScope queues at most once per scope and recipient
	// mailbox (queue.RecipientIdempotencyKey).
	IdempotencyScope string `json:"idempotency_scope,omitempty"`
	ClientIP         string `json:"client_ip,omitempty"`
	// BypassSuppression sends the mail even to a suppressed recipient
	// (queue.BypassSuppression): who and why, kept in the audit trail.
	BypassSuppression string `json:"bypass_suppression,omitempty"`
	// Priority is 0..9, 9 first; nil means queue.DefaultPriority.
	Priority    *int             `json:"priority,omitempty"`
	Attachments []attachmentSpec `json:"attachments,omitempty"`
}

// attachmentSpec is one attachment of a mailSpec: a file read from Path
// (relative to the working directory), or Content (base64 in JSON) named
// Filename. ContentType is sniffed from the bytes when empty; a ContentID
// makes it an inline part the HTML refers to as cid:ContentID. "show
// --full" lists attachments in this shape without their bytes, with Size.
type attachmentSpec struct {
	Path        string `json:"path,omitempty"`
	Filename    string `json:"filename,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	Content     []byte `json:"content,omitempty"`
	ContentID   string `json:"content_id,omitempty"`
	Size        int    `json:"size,omitempty"`
}

// attachFlags collects repeated --attach FILE[;type=T][;inline=CID] flags.
type attachFlags []attachmentSpec

func (a *attachFlags) String() string { return fmt.Sprint(len(*a)) }
func (a *attachFlags) Set(s string) error {
	spec := attachmentSpec{Path: s}
	// Options come last, each ";key=value"; a ';' before them stays part
	// of the file name.
	for {
		i := strings.LastIndexByte(spec.Path, ';')
		if i < 0 {
			break
		}
		key, value, ok := strings.Cut(spec.Path[i+1:], "=")
		if !ok || (key != "type" && key != "inline") {
			break
		}
		if value == "" {
			return fmt.Errorf("%q: %s= needs a value", s, key)
		}
		dst := &spec.ContentID
		if key == "type" {
			dst = &spec.ContentType
		}
		if *dst != "" {
			return fmt.Errorf("%q: %s= given twice", s, key)
		}
		*dst = value
		spec.Path = spec.Path[:i]
	}
	if spec.Path == "" {
		return fmt.Errorf("%q names no file", s)
	}
	*a = append(*a, spec)
	return nil
}

// attachment reads or decodes the attachment a describes.
func (a attachmentSpec) attachment() (transport.Attachment, error) {
	switch {
	case a.Size != 0:
		return transport.Attachment{}, errors.New("size is what show --full reports; give path or content")
	case a.Path != "" && a.Content != nil:
		return transport.Attachment{}, errors.New("give either path or content, not both")
	case a.Path != "":
		att, err := attachment.ReadFile(a.Path, a.ContentType, a.ContentID, transport.MaxEncodedSize)
		if err != nil {
			return transport.Attachment{}, err
		}
		if a.Filename != "" {
			att.Filename = a.Filename
		}
		return att, nil
	case a.Filename == "":
		return transport.Attachment{}, errors.New("content needs a filename")
	}
	return transport.Attachment{Filename: a.Filename, ContentType: a.ContentType, Data: a.Content, Inline: a.ContentID != "", ContentID: a.ContentID}, nil
}

type headerSpec struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// headerFlags collects repeated --header "Name: value" flags.
type headerFlags []headerSpec

func (h *headerFlags) String() string { return fmt.Sprint(*h) }
func (h *headerFlags) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	if !ok {
		return fmt.Errorf("%q is not \"Name: value\"", s)
	}
	*h = append(*h, headerSpec{Name: strings.TrimSpace(name), Value: strings.TrimSpace(value)})
	return nil
}

// enqueueFlags are the flags of "mailspool enqueue".
type enqueueFlags struct {
	store              storeFlags
	lane, file         string
	asJSON             bool
	mail               mailSpec
	headers            headerFlags
	attach             attachFlags
	textFile, htmlFile string
}

// prepared is one checked mail, ready to enqueue.
type prepared struct {
	msg  *transport.Message
	opts []queue.Option
}

func runEnqueue(ctx context.Context, e *env, args []string) error {
	fs, f := enqueueFlagSet(e)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := f.store.load()
	if err != nil {
		return err
	}
	l, err := pickOneLane(cfg, f.lane)
	if err != nil {
		return err
	}
	maxSize := l.Lane.MaxSize
	if maxSize == 0 {
		maxSize = queue.DefaultMaxSize
	}
	specs, err := f.specs(fs, e.stdin, boundsFor(maxSize))
	if err != nil {
		return err
	}
	mails, err := prepare(specs) // everything is checked before anything is written
	if err != nil {
		return err
	}
	_, db, err := f.store.open()
	if err != nil {
		return err
	}
	defer db.Close()
	// The lane's suppression policy and lists, screened beside every lane of
	// the config: a list may not take another lane's name.
	lanes := slices.Clone(cfg.Lanes)
	if err := config.Screen(db, lanes); err != nil {
		return err
	}
	i := slices.IndexFunc(lanes, func(c config.Lane) bool { return c.Lane.Name == l.Lane.Name })
	res, err := enqueueAll(ctx, e, db, lanes[i].Lane, mails)
	if err != nil {
		return err
	}
	return reportQueued(e, f.asJSON, l.Lane.Name, res)
}

func enqueueFlagSet(e *env) (*flag.FlagSet, *enqueueFlags) {
	fs := newFlagSet(e, "enqueue", "[--db URL] [--config FILE] [--lane NAME] (--file mails.json | --from ADDR --to ADDR --subject S --text T ...)")
	f := &enqueueFlags{}
	f.store.register(fs)
	filterVar(fs, &f.lane, "lane", "lane to queue into (default: the only lane; required when the config has several)")
	fs.StringVar(&f.file, "file", "", "JSON file with one mail object or an array of them (- for standard input); all are queued in one transaction or none")
	fs.BoolVar(&f.asJSON, "json", false, "print the queued row ids as JSON")
	m := &f.mail
	fs.StringVar(&m.From, "from", "", "sender, \"Name <addr>\" or addr")
	fs.StringVar(&m.To, "to", "", "recipient, \"Name <addr>\" or addr")
	fs.StringVar(&m.ReplyTo, "reply-to", "", "Reply-To address")
	fs.StringVar(&m.Subject, "subject", "", "subject")
	fs.StringVar(&m.Text, "text", "", "text body")
	fs.StringVar(&f.textFile, "text-file", "", "read the text body from this file")
	fs.StringVar(&m.HTML, "html", "", "HTML body")
	fs.StringVar(&f.htmlFile, "html-file", "", "read the HTML body from this file")
	fs.Var(&f.headers, "header", "extra header \"Name: value\" (repeatable)")
	fs.StringVar(&m.Template, "template", "", "template name, kept for statistics")
	fs.StringVar(&m.List, "list", "", "the mailing list of a bulk lane the mail belongs to (its unsubscribe link unsubscribes from that list only)")
	optionalInt(fs, &m.MaxAttempts, "max-attempts", "attempts before failing, 1..1000 (1 = single attempt); default the lane's")
	fs.StringVar(&m.NotAfter, "not-after", "", "drop the mail if not sent by this RFC 3339 time")
	fs.StringVar(&m.Delay, "delay", "", "send no earlier than this long from now (e.g. 10m, 2d)")
	fs.StringVar(&m.IdempotencyKey, "idempotency-key", "", "queue at most once per key (compared as written)")
	fs.StringVar(&m.IdempotencyScope, "idempotency-scope", "", "queue at most once per this scope and recipient mailbox, however the address is spelled")
	fs.StringVar(&m.ClientIP, "client-ip", "", "client IP the lane's IP limit applies to")
	fs.StringVar(&m.BypassSuppression, "bypass-suppression", "", "send even if the recipient is suppressed; the value says who and why, recorded in the audit trail (suppress bypasses)")
	fs.Var(&f.attach, "attach", "attach FILE; FILE;type=T sets its content type (sniffed otherwise), FILE;inline=CID makes it an inline part the HTML shows as cid:CID (repeatable)")
	optionalInt(fs, &m.Priority, "priority", "0..9, claimed highest first within the lane (default 5)")
	return fs, f
}

// optionalInt defines a whole-number flag whose value is stored in *p
// only when it is given, so that a value given out of range (0, -1) is
// refused where it is checked rather than read as "not given".
func optionalInt(fs *flag.FlagSet, p **int, name, usage string) {
	fs.Func(name, usage, func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", s)
		}
		*p = &n
		return nil
	})
}

// specs returns the mails the command line gives: from --file, or the one
// the message flags describe.
func (f *enqueueFlags) specs(fs *flag.FlagSet, stdin io.Reader, b fileBounds) ([]mailSpec, error) {
	if f.file != "" {
		if flagsGiven(fs, "file", "db", "config", "lane", "json") {
			return nil, usageError{"--file cannot be combined with message flags"}
		}
		return readSpecs(f.file, stdin, b)
	}
	m := f.mail
	m.Headers = f.headers
	m.Attachments = f.attach
	for _, b := range []struct {
		flag, path, inline string
		dst                *string
	}{{"text-file", f.textFile, "text", &m.Text}, {"html-file", f.htmlFile, "html", &m.HTML}} {
		if !flagGiven(fs, b.flag) {
			continue
		}
		if flagGiven(fs, b.inline) {
			return nil, usageError{fmt.Sprintf("--%s and --%s: give the body one way", b.inline, b.flag)}
		}
		if b.path == "" {
			return nil, usageError{fmt.Sprintf("--%s: empty (an unset variable?)", b.flag)}
		}
		body, err := readBody(b.path)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", b.flag, err)
		}
		*b.dst = body
	}
	return []mailSpec{m}, nil
}

// readBody reads a body file, at most transport.MaxMessageSize bytes: a
// larger file is refused after reading one byte more, not loaded whole.
func readBody(path string) (string, error) {
	file, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer file.Close()
	b, err := io.ReadAll(io.LimitReader(file, transport.MaxMessageSize+1))
	if err != nil {
		return "", err
	}
	if len(b) > transport.MaxMessageSize {
		return "", fmt.Errorf("%s is larger than the message size limit of %d bytes", path, transport.MaxMessageSize)
	}
	return string(b), nil
}

// prepare builds and validates every mail; the first problem is an error
// naming the mail.
func prepare(specs []mailSpec) ([]prepared, error) {
	mails := make([]prepared, len(specs))
	for i, s := range specs {
		msg, opts, err := s.build()
		if err == nil {
			err = msg.Validate()
		}
		if err != nil {
			if len(specs) > 1 {
				return nil, fmt.Errorf("mail %d of %d: %w (nothing was queued)", i+1, len(specs), err)
			}
			return nil, err
		}
		mails[i] = prepared{msg, opts}
	}
	return mails, nil
}

// enqueued is what enqueueAll did: each mail's row id, and whether the
// mail repeated an idempotency key (its id is then the first row's, and
// nothing was written).
type enqueued struct {
	ids       []int64
	duplicate []bool
}

// enqueueAll queues every mail in one transaction, or none.
func enqueueAll(ctx context.Context, e *env, db *sql.DB, lane queue.Lane, mails []prepared) (enqueued, error) {
	q, err := queue.New(ctx, db, lane, nil)
	if err != nil {
		return enqueued{}, err
	}
	if err := queue.CheckSchema(ctx, db, lane.Table); err != nil {
		return enqueued{}, err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return enqueued{}, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	res := enqueued{ids: make([]int64, len(mails)), duplicate: make([]bool, len(mails))}
	progress := len(mails) >= 1000
	for i, p := range mails {
		opts := append(p.opts[:len(p.opts):len(p.opts)], queue.ReportDuplicate(&res.duplicate[i]))
		if res.ids[i], err = q.Enqueue(ctx, tx, p.msg, opts...); err != nil {
			if len(mails) > 1 {
				return enqueued{}, fmt.Errorf("mail %d of %d: %w (nothing was queued)", i+1, len(mails), err)
			}
			return enqueued{}, err
		}
		if progress && (i+1)%1000 == 0 {
			fmt.Fprintf(e.stderr, "\rqueued %d of %d", i+1, len(mails))
		}
	}
	if err := tx.Commit(); err != nil {
		return enqueued{}, fmt.Errorf("commit: %w (nothing was queued)", err)
	}
	if progress {
		fmt.Fprintln(e.stderr)
	}
	return res, nil
}

// enqueueResult is "mailspool enqueue --json" (docs/JSON.md).
type enqueueResult struct {
	Lane string  `json:"lane"`
	IDs  []int64 `json:"ids"`
	// ID, Ref and Duplicate are set when one mail was given: its id, as
	// LANE/ID, and whether its idempotency key was used already (ID is
	// then the earlier mail's, and nothing was written).
	ID        int64  `json:"id,omitempty"`
	Ref       string `json:"ref,omitempty"`
	Duplicate bool   `json:"duplicate,omitempty"`
	// Queued counts the rows written; Duplicates are the 1-based
	// positions of the mails that repeated an idempotency key.
	Queued     int   `json:"queued"`
	Duplicates []int `json:"duplicates"`
}

// reportQueued prints the rows written. A mail that repeats an idempotency
// key (of an earlier run, or of a mail before it in the file) gets the
// first row's id and writes nothing; the report names those mails.
func reportQueued(e *env, asJSON bool, lane string, res enqueued) error {
	var written []int64
	var dups []int // 1-based positions in the file
	for i, id := range res.ids {
		if res.duplicate[i] {
			dups = append(dups, i+1)
		} else {
			written = append(written, id)
		}
	}
	if asJSON {
		out := enqueueResult{Lane: lane, IDs: res.ids, Queued: len(written), Duplicates: dups}
		if out.Duplicates == nil {
			out.Duplicates = []int{}
		}
		if len(res.ids) == 1 {
			out.ID, out.Ref, out.Duplicate = res.ids[0], refOf(lane, res.ids[0]), len(dups) == 1
		}
		return writeJSON(e.stdout, out)
	}
	switch {
	case len(res.ids) == 1 && len(dups) == 0:
		fmt.Fprintf(e.stdout, "queued mail %d in lane %s\n", res.ids[0], lane)
	case len(res.ids) == 1:
		fmt.Fprintf(e.stdout, "queued nothing in lane %s: the idempotency key was used already, by mail %d\n", lane, res.ids[0])
	default:
		fmt.Fprintf(e.stdout, "queued %d mails%s in lane %s\n", len(written), idList(" (ids ", written, ")"), lane)
		if len(dups) > 0 {
			var which []string
			for _, d := range dups {
				which = append(which, fmt.Sprintf("%d (as mail %d)", d, res.ids[d-1]))
			}
			fmt.Fprintf(e.stdout, "%d of the %d given repeat an idempotency key and queued nothing: %s\n", len(dups), len(res.ids), strings.Join(which, ", "))
		}
	}
	return nil
}

// idList writes ids as "a..b" when they are consecutive and ascending, else
// one by one; "" for none.
func idList(prefix string, ids []int64, suffix string) string {
	if len(ids) == 0 {
		return ""
	}
	consecutive := true
	for i := 1; i < len(ids); i++ {
		consecutive = consecutive && ids[i] == ids[i-1]+1
	}
	if consecutive && len(ids) > 1 {
		return fmt.Sprintf("%s%d..%d%s", prefix, ids[0], ids[len(ids)-1], suffix)
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return prefix + strings.Join(s, ", ") + suffix
}

func pickOneLane(cfg *config.Config, name string) (config.Lane, error) {
	if name == "" {
		if len(cfg.Lanes) > 1 {
			return config.Lane{}, usageError{fmt.Sprintf("the config has %d lanes: say which with --lane", len(cfg.Lanes))}
		}
		return cfg.Lanes[0], nil
	}
	lanes, err := cfg.Pick(name)
	if err != nil {
		return config.Lane{}, err
	}
	return lanes[0], nil
}

// flagsGiven reports whether any flag other than those named was set.
func flagsGiven(fs *flag.FlagSet, except ...string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) {
		for _, e := range except {
			if f.Name == e {
				return
			}
		}
		given = true
	})
	return given
}

// build turns a spec into a Message and enqueue options.
func (s mailSpec) build() (*transport.Message, []queue.Option, error) {
	m := &transport.Message{Subject: s.Subject, Text: s.Text, HTML: s.HTML}
	for _, a := range []struct {
		field, value string
		dst          *mail.Address
		required     bool
	}{{"from", s.From, &m.From, true}, {"to", s.To, &m.To, true}, {"reply_to", s.ReplyTo, &m.ReplyTo, false}} {
		if a.value == "" {
			if a.required {
				return nil, nil, fmt.Errorf("%s: missing", a.field)
			}
			continue
		}
		addr, err := mail.ParseAddress(a.value)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %q is not an address: %v", a.field, a.value, err)
		}
		*a.dst = *addr
	}
	for _, h := range s.Headers {
		m.Headers = append(m.Headers, transport.Header{Name: h.Name, Value: h.Value})
	}
	for i, a := range s.Attachments {
		att, err := a.attachment()
		if err != nil {
			return nil, nil, fmt.Errorf("attachments[%d]: %w", i, err)
		}
		m.Attachments = append(m.Attachments, att)
	}
	var opts []queue.Option
	if s.Priority != nil {
		opts = append(opts, queue.Priority(*s.Priority))
	}
	if s.List != "" {
		opts = append(opts, queue.List(s.List))
	}
	if s.Template != "" {
		opts = append(opts, queue.Template(s.Template))
	}
	if s.MaxAttempts != nil {
		opts = append(opts, queue.MaxAttempts(*s.MaxAttempts))
	}
	if s.NotAfter != "" {
		t, err := time.Parse(time.RFC3339, s.NotAfter)
		if err != nil {
			return nil, nil, fmt.Errorf("not_after: %q is not an RFC 3339 time like 2026-12-02T12:00:00Z", s.NotAfter)
		}
		opts = append(opts, queue.NotAfter(t))
	}
	if s.Delay != "" {
		d, err := duration.Parse(s.Delay)
		if err != nil {
			return nil, nil, fmt.Errorf("delay: %w", err)
		}
		opts = append(opts, queue.Delay(d))
	}
	if s.IdempotencyKey != "" {
		opts = append(opts, queue.IdempotencyKey(s.IdempotencyKey))
	}
	if s.IdempotencyScope != "" {
		if s.IdempotencyKey != "" {
			return nil, nil, errors.New("idempotency_key and idempotency_scope: give one")
		}
		opts = append(opts, queue.RecipientIdempotencyKey(s.IdempotencyScope))
	}
	if s.ClientIP != "" {
		opts = append(opts, queue.ClientIP(s.ClientIP))
	}
	if s.BypassSuppression != "" {
		opts = append(opts, queue.BypassSuppression(s.BypassSuppression))
	}
	return m, opts, nil
}

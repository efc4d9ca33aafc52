package cli

import (
	"context"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/mailspool/mailspool/inbound"
	"github.com/mailspool/mailspool/internal/termsafe"
	"github.com/mailspool/mailspool/queue"
)

// shownMail is "mailspool show --json": the row, and with --full the
// message in the shape "mailspool enqueue --file" reads.
type shownMail struct {
	Lane string `json:"lane"`
	Ref  string `json:"ref"` // LANE/ID

	queue.Row
	// Events are what the provider reported about the mail (mailspool
	// serve), oldest first.
	Events  []inbound.Event `json:"events,omitempty"`
	Message *mailSpec       `json:"message,omitempty"`
}

func runShow(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "show", "[--db URL] [--config FILE] [--lane NAME] [--full] [--json] (ID | LANE/ID | --id N | --message-id ID | --provider-id ID)")
	var lf laneFlags
	lf.registerOne(fs, "the lane (default: the one that has the id)")
	idFlag := filterString(fs, "id", "the mail's id, as enqueue and list print it: N or LANE/N (or give it as the argument)")
	messageID := filterString(fs, "message-id", "the mail whose Message-ID header is this (with or without <>)")
	providerID := filterString(fs, "provider-id", "the mail the provider (SES, SendGrid, the relay) accepted under this id")
	full := fs.Bool("full", false, "also print the headers and bodies as they will be sent")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	given := 0
	for _, s := range []string{*idFlag, *messageID, *providerID} {
		if s != "" {
			given++
		}
	}
	switch {
	case len(pos) > 1 || (len(pos) == 1 && given > 0):
		return usageError{"give one mail: an id (as the argument or --id), --message-id or --provider-id"}
	case len(pos) == 1:
		*idFlag, given = pos[0], 1
	}
	if given != 1 {
		return usageError{"give one mail: an id (as the argument or --id), --message-id or --provider-id"}
	}
	var ref mailRef
	if *idFlag != "" {
		if ref, err = parseRef(*idFlag); err != nil {
			return err
		}
	}
	lanes, qs, db, err := lf.openQueues(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	var at int
	var r queue.Row
	if *idFlag != "" {
		if at, err = locate(ctx, lanes, qs, ref); err != nil {
			return err
		}
		if r, err = qs[at].Row(ctx, ref.id); err != nil {
			return err
		}
	} else {
		what := "--message-id " + *messageID
		if *providerID != "" {
			what = "--provider-id " + *providerID
		}
		rows, names, err := find(ctx, lanes, qs, queue.Filter{MessageID: *messageID, ProviderID: *providerID})
		if err != nil {
			return err
		}
		switch len(rows) {
		case 0:
			return fmt.Errorf("%w: no mail has %s", queue.ErrNotFound, what)
		case 1:
		default:
			return ambiguousError{what: what, candidates: rows, lanes: names}
		}
		r = rows[0]
		at, _ = laneIndex(lanes, names[0])
	}
	id := &r.ID
	out := shownMail{Lane: lanes[at].Lane.Name, Ref: refOf(lanes[at].Lane.Name, r.ID), Row: r}
	if out.Events, err = inbound.ForMail(ctx, db, r.ProviderID, r.MessageID); err != nil {
		return err
	}
	if *full {
		m, err := qs[at].Message(ctx, *id)
		if err != nil {
			return err
		}
		spec := &mailSpec{From: addrString(m.From), To: addrString(m.To), Subject: m.Subject, Text: m.Text, HTML: m.HTML}
		if m.ReplyTo.Address != "" {
			spec.ReplyTo = addrString(m.ReplyTo)
		}
		for _, h := range m.Headers {
			spec.Headers = append(spec.Headers, headerSpec{Name: h.Name, Value: h.Value})
		}
		files, err := qs[at].Attachments(ctx, *id)
		if err != nil {
			return err
		}
		for _, a := range files {
			spec.Attachments = append(spec.Attachments, attachmentSpec{Filename: a.Filename, ContentType: a.ContentType, ContentID: a.ContentID, Size: a.Size})
		}
		out.Message = spec
	}
	if lf.asJSON {
		return writeJSON(e.stdout, out)
	}
	// The text view names sender and recipient as the mail does, display
	// names included.
	if m, err := qs[at].Message(ctx, *id); err == nil {
		out.Row.From, out.Row.To = addrString(m.From), addrString(m.To)
	}
	printRow(e, out)
	return nil
}

func printRow(e *env, s shownMail) {
	s = escapedForTerminal(s)
	r := s.Row
	w := e.stdout
	at := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	fmt.Fprintf(w, "mail %d in lane %s\n", r.ID, s.Lane)
	fmt.Fprintf(w, "  status       %s, %d of %d attempts\n", r.Status, r.Attempts, r.MaxAttempts)
	if r.Priority != queue.DefaultPriority {
		fmt.Fprintf(w, "  priority     %d\n", r.Priority)
	}
	fmt.Fprintf(w, "  from         %s\n  to           %s\n  subject      %s\n", r.From, r.To, r.Subject)
	if r.Template != "" {
		fmt.Fprintf(w, "  template     %s\n", r.Template)
	}
	fmt.Fprintf(w, "  message-id   <%s>\n", r.MessageID)
	if r.ProviderID != "" {
		fmt.Fprintf(w, "  provider id  %s   (search the provider's logs for it)\n", r.ProviderID)
	}
	if r.Member != "" {
		fmt.Fprintf(w, "  member       %s   (the lane transport's member of the last outcome)\n", r.Member)
	}
	switch {
	case r.LastKind == "sent":
		fmt.Fprintln(w, "  last outcome sent")
	case r.LastKind != "" && r.LastCode != 0:
		fmt.Fprintf(w, "  last outcome %s %d: %s\n", r.LastKind, r.LastCode, r.LastError)
	case r.LastKind != "":
		fmt.Fprintf(w, "  last outcome %s: %s\n", r.LastKind, r.LastError)
	}
	if r.LastRule != "" {
		fmt.Fprintf(e.stdout, "  decided by   rule %s   (mailspool classify explains a reply)\n", r.LastRule)
	}
	if r.LastScope != "" {
		fmt.Fprintf(w, "  about        %s\n", r.LastScope)
	}
	if f := r.EarlierFailure; f != nil {
		// History: the attempt that sent the mail came after it.
		fmt.Fprintf(w, "  earlier      an attempt before the one that sent it failed:%s %s", orEmpty(f.Code != 0, fmt.Sprintf(" %d", f.Code)), f.Error)
		if f.Rule != "" {
			fmt.Fprintf(w, " (rule %s)", f.Rule)
		}
		fmt.Fprintln(w)
	}
	switch {
	case r.Crashes > 0:
		fmt.Fprintf(w, "  note         may have been delivered before: a worker stopped while sending it (lease expired %d time(s)), so it was sent again\n", r.Crashes)
	case r.MaybeDelivered:
		fmt.Fprintln(w, "  note         an earlier attempt may have been delivered (dropped after the data was sent)")
	}
	fmt.Fprintf(w, "  enqueued     %s\n", at(r.CreatedAt))
	for _, t := range []struct {
		label string
		t     time.Time
	}{{"due", r.DueAt}, {"lease ends", r.LeaseEnds}, {"finished", r.FinishedAt}, {"sent", r.SentAt}, {"not after", r.NotAfter}} {
		if !t.t.IsZero() {
			fmt.Fprintf(w, "  %-12s %s\n", t.label, at(t.t))
		}
	}
	for i, h := range r.History {
		label := ""
		if i == 0 {
			label = "history"
		}
		fmt.Fprintf(w, "  %-12s %s\n", label, h)
	}
	for i, ev := range s.Events {
		label := ""
		if i == 0 {
			label = "events"
		}
		fmt.Fprintf(w, "  %-12s %s %s %s %s %s\n", label, at(ev.Time), ev.Provider, ev.Type, ev.Recipient, ev.Detail)
	}
	if m := s.Message; m != nil {
		fmt.Fprintln(w, "\nheaders")
		if m.ReplyTo != "" {
			fmt.Fprintf(w, "  Reply-To: %s\n", m.ReplyTo)
		}
		for _, h := range m.Headers {
			fmt.Fprintf(w, "  %s: %s\n", h.Name, h.Value)
		}
		if len(m.Attachments) > 0 {
			fmt.Fprintln(w, "\nattachments")
			for _, a := range m.Attachments {
				inline := ""
				if a.ContentID != "" {
					inline = "   inline, cid:" + a.ContentID
				}
				fmt.Fprintf(w, "  %s   %s, %d bytes%s\n", a.Filename, a.ContentType, a.Size, inline)
			}
		}
		if m.Text != "" {
			fmt.Fprintf(w, "\ntext body\n%s\n", m.Text)
		}
		if m.HTML != "" {
			fmt.Fprintf(w, "\nHTML body\n%s\n", m.HTML)
		}
	}
}

// escapedForTerminal returns s with every stored text that came from
// outside (addresses, subject, template, ids, the provider's answer,
// headers, bodies) escaped by termsafe: a subject holding "ESC ]52;..."
// must not set the operator's clipboard. JSON output needs none of this:
// encoding/json escapes control characters.
func escapedForTerminal(s shownMail) shownMail {
	t := termsafe.Escape
	r := s.Row
	r.From, r.To, r.Subject, r.Template = t(r.From), t(r.To), t(r.Subject), t(r.Template)
	r.MessageID, r.ProviderID, r.LastError, r.LastRule = t(r.MessageID), t(r.ProviderID), t(r.LastError), t(r.LastRule)
	r.Member = t(r.Member)
	if f := r.EarlierFailure; f != nil {
		r.EarlierFailure = &queue.EarlierFailure{Code: f.Code, Rule: t(f.Rule), Scope: f.Scope, Error: t(f.Error)}
	}
	r.History = slices.Clone(r.History)
	for i, h := range r.History {
		r.History[i] = t(h)
	}
	s.Row = r
	if s.Message != nil {
		m := *s.Message
		m.ReplyTo = t(m.ReplyTo)
		m.Headers = slices.Clone(m.Headers)
		for i, h := range m.Headers {
			m.Headers[i] = headerSpec{Name: t(h.Name), Value: t(h.Value)}
		}
		m.Text, m.HTML = termsafe.EscapeBody(m.Text), termsafe.EscapeBody(m.HTML)
		s.Message = &m
	}
	return s
}

// addrString writes a as "Name <addr>" in plain UTF-8 (mail.Address.String
// would encode the name for a header), quoting the name where needed.
func addrString(a mail.Address) string {
	if a.Name == "" {
		return a.Address
	}
	name := a.Name
	if strings.ContainsAny(name, `()<>[]:;@\,."`) {
		name = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(name) + `"`
	}
	return name + " <" + a.Address + ">"
}

func orEmpty(ok bool, s string) string {
	if !ok {
		return ""
	}
	return s
}

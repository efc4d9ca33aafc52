package bounce

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"regexp"
	"strings"
)

// Kind is what a received message is.
type Kind string

// The kinds.
const (
	DSN       Kind = "dsn"        // an RFC 3464 delivery status notification
	Complaint Kind = "complaint"  // an RFC 5965 ARF report, or a Microsoft JMRP one
	Plain     Kind = "plain"      // a bounce in one of the common non-standard formats
	AutoReply Kind = "auto_reply" // a vacation notice, an out-of-office reply: ignored
	Other     Kind = "other"      // nothing we read: ignored
)

// Recipient is one recipient's part of a report.
type Recipient struct {
	FinalRecipient    string // the address, without its type ("rfc822;")
	OriginalRecipient string
	Action            string // failed, delayed, delivered, relayed, expanded (lower case)
	Status            string // the RFC 3463 code, e.g. 5.1.1
	Diagnostic        string // the Diagnostic-Code's text, without its type ("smtp;")
	DiagnosticType    string // "smtp", "x-postfix", ...
	RemoteMTA         string
}

// Report is what Parse makes of a message.
type Report struct {
	Kind       Kind
	Recipients []Recipient // DSN and Plain
	// FeedbackType is an ARF report's Feedback-Type (abuse, fraud, virus,
	// other, not-spam, auth-failure), lower case; "abuse" for JMRP.
	FeedbackType string
	// OriginalMessageID is the Message-ID of the mail the report is about,
	// when the report includes its headers.
	OriginalMessageID string
}

// maxPart bounds what is read of one MIME part.
const maxPart = 1 << 20

// maxDepth bounds the nesting of multiparts walked.
const maxDepth = 5

// Parse reads a message received at a return path. It never fails: what
// it cannot read is Other.
func Parse(raw []byte) *Report {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return &Report{Kind: Other}
	}
	r := &Report{Kind: Other}
	w := &walker{r: r}
	w.walk(textproto.MIMEHeader(msg.Header), msg.Body, 0)
	switch {
	case w.feedback != nil:
		r.Kind = Complaint
		r.FeedbackType = strings.ToLower(strings.TrimSpace(w.feedback.Get("Feedback-Type")))
		if r.FeedbackType == "" {
			r.FeedbackType = "abuse"
		}
	case w.jmrp:
		r.Kind, r.FeedbackType = Complaint, "abuse"
	case w.status != nil:
		r.Kind = DSN
		r.Recipients = parseStatus(w.status)
		if len(r.Recipients) == 0 { // an empty delivery-status part (Gmail sends some)
			r.Recipients = plainRecipients(msg.Header, w.text)
		}
	case looksLikeBounce(msg.Header, w.text):
		r.Kind = Plain
		r.Recipients = plainRecipients(msg.Header, w.text)
	case autoReply(msg.Header):
		r.Kind = AutoReply
	}
	r.OriginalMessageID = w.originalID
	return r
}

// walker collects the parts of interest of a message.
type walker struct {
	r          *Report
	status     []byte               // the message/delivery-status part
	feedback   textproto.MIMEHeader // the message/feedback-report part
	jmrp       bool                 // a Microsoft JMRP complaint: the original with X-HmXmrOriginalRecipient
	text       string               // the first text/plain part (the human-readable notice)
	originalID string
}

func (w *walker) walk(h textproto.MIMEHeader, body io.Reader, depth int) {
	ct := h.Get("Content-Type")
	if ct == "" {
		ct = "text/plain"
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		mt = "text/plain"
	}
	if strings.HasPrefix(mt, "multipart/") {
		if depth >= maxDepth || params["boundary"] == "" {
			return
		}
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if err != nil {
				return
			}
			w.walk(p.Header, p, depth+1)
		}
	}
	data, _ := io.ReadAll(io.LimitReader(decode(h.Get("Content-Transfer-Encoding"), body), maxPart))
	switch mt {
	case "message/delivery-status", "message/global-delivery-status":
		if w.status == nil {
			w.status = data
		}
	case "message/feedback-report":
		if w.feedback == nil {
			w.feedback = readHeader(data)
		}
	case "message/rfc822", "text/rfc822-headers", "message/rfc822-headers", "message/global", "message/global-headers":
		oh := readHeader(data)
		if id := oh.Get("Message-Id"); id != "" && w.originalID == "" {
			w.originalID = strings.Trim(strings.TrimSpace(id), "<>")
		}
		if oh.Get("X-Hmxmroriginalrecipient") != "" {
			w.jmrp = true
		}
	case "text/plain":
		if w.text == "" {
			w.text = string(data)
		}
	}
}

func decode(cte string, r io.Reader) io.Reader {
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "base64":
		return base64.NewDecoder(base64.StdEncoding, newlineStripper{r})
	case "quoted-printable":
		return quotedprintable.NewReader(r)
	}
	return r
}

// newlineStripper drops CR and LF, which base64.NewDecoder would not
// skip inside a quantum on every Go version.
type newlineStripper struct{ r io.Reader }

func (n newlineStripper) Read(p []byte) (int, error) {
	k, err := n.r.Read(p)
	j := 0
	for _, b := range p[:k] {
		if b != '\r' && b != '\n' {
			p[j] = b
			j++
		}
	}
	return j, err
}

// readHeader reads a header block, tolerating a missing blank line.
func readHeader(data []byte) textproto.MIMEHeader {
	tr := textproto.NewReader(bufio.NewReader(io.MultiReader(bytes.NewReader(data), strings.NewReader("\r\n\r\n"))))
	h, _ := tr.ReadMIMEHeader()
	return h
}

// parseStatus reads a delivery-status body: a per-message block, then
// one block per recipient.
func parseStatus(data []byte) []Recipient {
	data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	blocks := regexp.MustCompile(`\n[ \t]*\n`).Split(strings.TrimSpace(string(data)), -1)
	var out []Recipient
	for _, b := range blocks {
		h := readHeader([]byte(b + "\n"))
		final := h.Get("Final-Recipient")
		if final == "" {
			continue // the per-message block
		}
		r := Recipient{
			FinalRecipient:    typed(final),
			OriginalRecipient: typed(h.Get("Original-Recipient")),
			Action:            strings.ToLower(strings.TrimSpace(h.Get("Action"))),
			Status:            firstField(h.Get("Status")),
			RemoteMTA:         typed(h.Get("Remote-Mta")),
		}
		if d := h.Get("Diagnostic-Code"); d != "" {
			t, text, ok := strings.Cut(d, ";")
			if ok {
				r.DiagnosticType, r.Diagnostic = strings.ToLower(strings.TrimSpace(t)), strings.TrimSpace(text)
			} else {
				r.Diagnostic = strings.TrimSpace(d)
			}
		}
		out = append(out, r)
	}
	return out
}

// typed strips an address type: "rfc822; ann@example.com" → the address.
func typed(v string) string {
	if _, a, ok := strings.Cut(v, ";"); ok {
		v = a
	}
	return strings.Trim(strings.TrimSpace(v), "<>")
}

func firstField(v string) string {
	f := strings.Fields(v)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

var (
	bounceSubject = regexp.MustCompile(`(?i)undeliver|returned mail|delivery (status notification|failure|has failed|failed)|mail delivery failed|failure notice|non.?delivery|could not be delivered|delivery problem`)
	bounceFrom    = regexp.MustCompile(`(?i)mailer-daemon|postmaster|mail delivery (subsystem|system)`)
	smtpReply     = regexp.MustCompile(`\b([45][0-9][0-9])[ -]+(?:#?([45]\.[0-9]{1,3}\.[0-9]{1,3})\b)?[ ]*([^\r\n]*)`)
	qmailStatus   = regexp.MustCompile(`\(#([45]\.[0-9]{1,3}\.[0-9]{1,3})\)`)
	vacation      = regexp.MustCompile(`(?i)^(auto(matic)?[ -]?(reply|response|antwort)|out of (the )?office|vacation|abwesenheit|auto:|autoreply|réponse automatique)`)
)

// looksLikeBounce says whether a message without a delivery-status part
// is a bounce: from a mailer daemon or with a bounce's subject, and an
// SMTP reply or a qmail status in its text.
func looksLikeBounce(h mail.Header, text string) bool {
	if h.Get("X-Failed-Recipients") != "" {
		return true
	}
	if !bounceSubject.MatchString(h.Get("Subject")) && !bounceFrom.MatchString(h.Get("From")) {
		return false
	}
	return smtpReply.MatchString(text) || qmailStatus.MatchString(text)
}

// plainRecipients reads one result out of a non-standard bounce's text:
// the first SMTP reply of class 4 or 5 (Exim's "SMTP error from remote
// mail server after RCPT TO:...: 550 ...", sendmail's "... User
// unknown"), or a qmail "(#5.1.1)". The recipient is the mail's own (the
// return path says which mail); X-Failed-Recipients names it when there.
func plainRecipients(h mail.Header, text string) []Recipient {
	r := Recipient{Action: "failed", FinalRecipient: strings.TrimSpace(strings.Split(h.Get("X-Failed-Recipients"), ",")[0])}
	if m := smtpReply.FindStringSubmatch(text); m != nil {
		r.DiagnosticType, r.Diagnostic, r.Status = "smtp", strings.TrimSpace(m[0]), m[2]
		if r.Status == "" {
			r.Status = m[1][:1] + ".0.0"
		}
	} else if m := qmailStatus.FindStringSubmatch(text); m != nil {
		r.Status = m[1]
		r.Diagnostic = strings.TrimSpace(firstLines(text, 3))
	} else {
		return nil
	}
	return []Recipient{r}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(strings.TrimSpace(s), "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " ")
}

// autoReply says whether a message is an automatic reply (RFC 3834
// Auto-Submitted, the headers vacation programs and Exchange set, or an
// out-of-office subject).
func autoReply(h mail.Header) bool {
	if as := strings.ToLower(strings.TrimSpace(h.Get("Auto-Submitted"))); as != "" && as != "no" {
		return true
	}
	for _, k := range []string{"X-Autoreply", "X-Autorespond", "X-Auto-Response-Suppress"} {
		if h.Get(k) != "" {
			return true
		}
	}
	if p := strings.ToLower(h.Get("Precedence")); p == "auto_reply" || p == "bulk" || p == "junk" {
		return true
	}
	return vacation.MatchString(strings.TrimSpace(h.Get("Subject")))
}

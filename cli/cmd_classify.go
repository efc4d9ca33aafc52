package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/mailspool/mailspool/classify"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/sendgrid"
	"github.com/mailspool/mailspool/transport/ses"
)

// classifyResult is what "mailspool classify --json" prints.
type classifyResult struct {
	Kind           string  `json:"kind"`
	Code           int     `json:"code,omitempty"`
	Enhanced       string  `json:"enhanced,omitempty"`
	RetryAfter     float64 `json:"retry_after_seconds,omitempty"`
	MaybeDelivered bool    `json:"maybe_delivered,omitempty"`
	Scope          string  `json:"scope"`               // recipient, message, sender, transient or lane
	Recipient      bool    `json:"recipient,omitempty"` // scope is recipient
	Rule           string  `json:"rule"`
	Detail         string  `json:"detail,omitempty"`
	Transport      string  `json:"transport"`
	Lane           string  `json:"lane,omitempty"`
}

const classifyArgs = "[--config FILE] [--lane NAME] [--transport smtp|ses|sendgrid] [--at MAIL|RCPT|DATA|AUTH] [--relay=true|false] [--json] 'REPLY TEXT'"

// runClassify explains how mailspool classifies a reply: its kind and the
// rule (the lane's own or the built-in one) that decided it.
func runClassify(_ context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "classify", classifyArgs)
	configPath := fs.String("config", "", "TOML config file; the lane's rules and transport are used")
	lane := filterString(fs, "lane", "use this lane's classification rules (default: the only lane of --config, or none)")
	kind := fs.String("transport", "", "how the reply arrived: smtp (a reply or an error text), ses (\"[STATUS] Code: message\") or sendgrid (\"STATUS BODY\"); default: the lane's, else smtp")
	at := fs.String("at", "", "smtp: the command the reply answered (MAIL, RCPT, DATA, AUTH); default unknown")
	var relay optionalBool
	fs.Var(&relay, "relay", "smtp: the lane submits through a relay (logs in, or a submission port), not to the recipient's server; default: the lane's transport URL says, else false")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{"give the reply text as one argument (quote it)"}
	}
	switch *at = strings.ToUpper(*at); *at {
	case "", "MAIL", "RCPT", "DATA", "AUTH", "EHLO":
	default:
		return usageError{fmt.Sprintf("--at %q: want MAIL, RCPT, DATA, AUTH or EHLO", *at)}
	}
	text := pos[0]
	var rules *classify.Rules
	laneName := ""
	if *configPath != "" || *lane != "" {
		cfg, err := (&storeFlags{config: *configPath}).load()
		if err != nil {
			return err
		}
		l, err := pickOneLane(cfg, *lane)
		if err != nil {
			return err
		}
		rules, laneName = l.Rules, l.Lane.Name
		if *kind == "" {
			*kind = transportKind(l.Transport)
		}
		if !relay.set {
			relay.value = smtpRelay(l.Transport)
		}
	}
	if *kind == "" {
		*kind = "smtp"
	}
	err, perr := classifyText(*kind, text, classify.Session{Relay: relay.value, Command: *at})
	if perr != nil {
		return perr
	}
	d := classify.Explain(rules.Apply(err))
	res := classifyResult{
		Kind: d.Kind.String(), Code: d.Code, Enhanced: d.Enhanced, RetryAfter: d.RetryAfter.Seconds(),
		MaybeDelivered: d.MaybeDelivered, Scope: d.Scope.String(), Recipient: d.Scope == transport.ScopeRecipient, Rule: d.Rule, Detail: d.Detail,
		Transport: *kind, Lane: laneName,
	}
	if *asJSON {
		return writeJSON(e.stdout, res)
	}
	w := e.stdout
	fmt.Fprintf(w, "kind            %s\n", res.Kind)
	fmt.Fprintf(w, "code            %s\n", orDash(res.Code != 0, strconv.Itoa(res.Code)))
	fmt.Fprintf(w, "enhanced code   %s\n", orDash(res.Enhanced != "", res.Enhanced))
	fmt.Fprintf(w, "retry after     %s\n", orDash(d.RetryAfter > 0, d.RetryAfter.String()))
	fmt.Fprintf(w, "maybe delivered %s\n", yesNo(res.MaybeDelivered))
	fmt.Fprintf(w, "scope           %s (%s)\n", res.Scope, scopeMeaning[d.Scope])
	fmt.Fprintf(w, "decided by      %s\n", ruleOrigin(res.Rule, laneName))
	if res.Detail != "" {
		fmt.Fprintf(w, "detail          %s\n", res.Detail)
	}
	return nil
}

// scopeMeaning says what each scope does, for the classify command.
var scopeMeaning = map[transport.Scope]string{
	transport.ScopeRecipient: "about this address: may be permanent, may suppress it, never pauses the lane",
	transport.ScopeMessage:   "about this content: may be permanent, never pauses the lane",
	transport.ScopeSender:    "about our sender, account, domain or IP: retried, never permanent, raises the lane's alert",
	transport.ScopeTransient: "about now: retried, never permanent",
	transport.ScopeLane:      "about the connection or provider: feeds the lane's breaker",
}

// classifyText classifies text as the transport kind would have received
// it, an SMTP reply as one of session s. perr is a usage error for text
// that transport cannot have sent.
func classifyText(kind, text string, s classify.Session) (err, perr error) {
	switch kind {
	case "smtp":
		if _, _, ok := strings.Cut(text, " "); ok || len(text) == 3 {
			if code, convErr := strconv.Atoi(text[:min(3, len(text))]); convErr == nil && code >= 200 && code <= 599 {
				return s.SMTPReply(text), nil
			}
		}
		// An error text as a Go SMTP library prints it.
		return s.Error(errors.New(text)), nil
	case "ses":
		// "[STATUS] Code: message": the HTTP status is optional (400 by
		// default) and may be written in brackets, as the docs show it.
		status := 400
		if s, rest, ok := strings.Cut(strings.TrimSpace(text), " "); ok {
			if n, convErr := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")); convErr == nil {
				status, text = n, rest
			}
		}
		code, msg, _ := strings.Cut(strings.TrimSpace(text), ":")
		if code == "" || strings.ContainsAny(code, " \t") || status < 100 || status > 599 {
			return nil, usageError{"--transport ses: want \"[STATUS] Code: message\" (the HTTP status optional, 400 by default), e.g. \"400 InvalidParameterValue: Missing final '@domain'\", \"[400] Throttling: Maximum sending rate exceeded.\" or \"MessageRejected: Email address is not verified.\""}
		}
		return ses.Classify(status, code, strings.TrimSpace(msg)), nil
	case "sendgrid":
		s, body, _ := strings.Cut(text, " ")
		status, convErr := strconv.Atoi(s)
		if convErr != nil || status < 100 || status > 599 {
			return nil, usageError{"--transport sendgrid: want \"STATUS BODY\", e.g. '403 {\"errors\":[{\"message\":\"...\"}]}'"}
		}
		return sendgrid.Classify(status, body), nil
	}
	return nil, usageError{fmt.Sprintf("--transport %q: want smtp, ses or sendgrid", kind)}
}

// transportKind is the --transport that matches a lane's transport URL.
func transportKind(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "smtp"
	}
	switch u.Scheme {
	case ses.Scheme:
		return "ses"
	case sendgrid.Scheme:
		return "sendgrid"
	}
	return "smtp"
}

// smtpRelay reports whether an smtp:// or smtps:// transport URL submits
// through a relay, as the adapter judges it: it logs in, or its port is a
// submission port (587 by default, 465).
func smtpRelay(rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "smtp" && u.Scheme != "smtps") {
		return false
	}
	return u.User != nil || u.Port() == "" || u.Port() == "587" || u.Port() == "465"
}

// optionalBool is a boolean flag that knows whether it was given.
type optionalBool struct{ value, set bool }

func (b *optionalBool) String() string   { return strconv.FormatBool(b.value) }
func (b *optionalBool) IsBoolFlag() bool { return true }
func (b *optionalBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	b.value, b.set = v, true
	return err
}

// ruleOrigin says where a rule comes from.
func ruleOrigin(rule, lane string) string {
	if name, ok := strings.CutPrefix(rule, classify.OperatorPrefix); ok {
		return fmt.Sprintf("%s (lane %s's rule %q)", rule, lane, name)
	}
	if rule == "sent" || rule == "none" {
		return rule
	}
	return rule + " (built-in)"
}

func orDash(ok bool, s string) string {
	if !ok {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

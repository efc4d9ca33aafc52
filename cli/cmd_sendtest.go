package cli

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strings"

	"github.com/mailspool/mailspool/classify"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/composite"
	"github.com/mailspool/mailspool/transport/fake"
)

// sendTestResult is the outcome "mailspool send-test --json" prints.
type sendTestResult struct {
	Transport      string  `json:"transport"` // redacted
	Fake           bool    `json:"fake,omitempty"`
	Kind           string  `json:"kind"`
	MessageID      string  `json:"message_id,omitempty"`
	Response       string  `json:"response,omitempty"`
	Member         string  `json:"member,omitempty"` // the composite's member that answered
	Code           int     `json:"code,omitempty"`
	Enhanced       string  `json:"enhanced,omitempty"`
	RetryAfter     float64 `json:"retry_after_seconds,omitempty"`
	MaybeDelivered bool    `json:"maybe_delivered,omitempty"`
	Rule           string  `json:"rule,omitempty"` // the classification rule that decided
	Error          string  `json:"error,omitempty"`
}

func runSendTest(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "send-test", "--from ADDR --to ADDR [--transport URL | --lane NAME] [--json]")
	var sf storeFlags
	fs.StringVar(&sf.config, "config", "", "TOML config file; the lane's transport is used")
	lane := filterString(fs, "lane", "use this lane's transport (default: the only lane)")
	rawURL := fs.String("transport", "", "transport URL to test instead of a lane's (e.g. smtp://user@host:587?password_env=SMTP_PASSWORD)")
	from := fs.String("from", "", "sender address (required)")
	to := fs.String("to", "", "recipient address (required)")
	subject := fs.String("subject", "mailspool test mail", "subject")
	asJSON := fs.Bool("json", false, "print the outcome as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *from == "" || *to == "" {
		return usageError{"--from and --to are required"}
	}
	if flagGiven(fs, "transport") {
		// The URL is tested instead of a lane's: a lane or a config
		// given with it would be ignored.
		for _, other := range []string{"lane", "config"} {
			if flagGiven(fs, other) {
				return usageError{fmt.Sprintf("--transport and --%s: --transport tests that URL instead of a lane's transport; give one", other)}
			}
		}
		if *rawURL == "" {
			return usageError{"--transport: empty (an unset variable?); leave it out to test the lane's transport"}
		}
	}
	fromAddr, err := mail.ParseAddress(*from)
	if err != nil {
		return usageError{fmt.Sprintf("--from %q: %v", *from, err)}
	}
	toAddr, err := mail.ParseAddress(*to)
	if err != nil {
		return usageError{fmt.Sprintf("--to %q: %v", *to, err)}
	}
	u := *rawURL
	var rules *classify.Rules
	laneName := "send-test"
	if u == "" {
		cfg, err := sf.load()
		if err != nil {
			return err
		}
		l, err := pickOneLane(cfg, *lane)
		if err != nil {
			return err
		}
		if err := l.CheckTransport(); err != nil {
			return fmt.Errorf("%w (or pass --transport URL)", err)
		}
		u, rules, laneName = l.Transport, l.Rules, l.Lane.Name
	}
	fake := isFake(u)
	tr, err := e.openTransport(ctx, laneName, u)
	if err != nil {
		return err
	}
	defer tr.Close()
	tr = rules.Transport(tr)
	msg := &transport.Message{
		From: *fromAddr, To: *toAddr, Subject: *subject,
		Text: "This is a test mail sent by mailspool send-test through " + transport.Redact(u) + ".\n",
	}
	receipt, err := queue.SendNow(ctx, tr, msg)
	res := sendTestResult{Transport: transport.Redact(u), Fake: fake, Kind: transport.KindOf(err).String(), MessageID: receipt.MessageID, Response: receipt.Response, Member: receipt.Member}
	if err != nil {
		res.Member = composite.MemberOf(err)
	}
	var te *transport.Error
	if errors.As(err, &te) {
		res.Code, res.Enhanced, res.MaybeDelivered, res.Rule = te.Code, te.Enhanced, te.MaybeDelivered, te.Rule
		res.RetryAfter = te.RetryAfter.Seconds()
	}
	if err != nil {
		res.Error = err.Error()
	}
	if *asJSON {
		if werr := writeJSON(e.stdout, res); werr != nil {
			return werr
		}
	} else {
		if fake {
			fmt.Fprintf(e.stdout, "transport %s is the fake: it replays recorded replies and delivers nothing\n", res.Transport)
		}
		if err == nil {
			fmt.Fprintf(e.stdout, "sent: message id %s", res.MessageID)
			if res.Response != "" {
				fmt.Fprintf(e.stdout, " (%s)", res.Response)
			}
			if res.Member != "" {
				fmt.Fprintf(e.stdout, " via member %s", res.Member)
			}
			fmt.Fprintln(e.stdout)
		}
	}
	if err == nil {
		return nil
	}
	what := res.Kind
	if res.Rule != "" {
		what += ", rule " + res.Rule
	}
	err = fmt.Errorf("not sent (%s): %w", what, err)
	if transport.KindOf(err) == transport.Permanent {
		return exitError{exitPermanent, err}
	}
	return err
}

// isFake reports whether rawURL names the fake transport.
func isFake(rawURL string) bool {
	scheme, _, _ := strings.Cut(rawURL, ":")
	return strings.EqualFold(scheme, fake.Scheme)
}

package config

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mailspool/mailspool/inbound"
	"github.com/mailspool/mailspool/internal/duration"
	"github.com/mailspool/mailspool/queue"
)

// serveConfig is the [serve] table: the public endpoint of the provider
// webhooks (mailspool serve), separate from the admin listener.
//
//	[serve]
//	listen            = "0.0.0.0:8025"
//	window            = "15m"          # how old a signed message may be
//	max_body          = 4194304        # bytes
//	unsubscribe_scope = "marketing"    # unsubscribe events suppress in this lane ("" = not at all)
//
//	[serve.sendgrid]
//	verification_key_env = "SENDGRID_WEBHOOK_KEY"  # or verification_key = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE..."
//
//	[serve.ses]
//	topic_arns = ["arn:aws:sns:eu-west-1:123456789012:ses-events"]
type serveConfig struct {
	Listen           string             `toml:"listen"`
	Window           string             `toml:"window"`
	MaxBody          int64              `toml:"max_body"`
	UnsubscribeScope string             `toml:"unsubscribe_scope"`
	SendGrid         *sendGridServe     `toml:"sendgrid"`
	SES              *sesServe          `toml:"ses"`
	Suppression      *suppressionConfig `toml:"suppression"`
}

type sendGridServe struct {
	VerificationKey    string `toml:"verification_key"`
	VerificationKeyEnv string `toml:"verification_key_env"`
}

type sesServe struct {
	TopicARNs []string `toml:"topic_arns"`
}

// Serve is the validated [serve] table.
type Serve struct {
	// Listen is the host:port of the public webhook listener.
	Listen string
	// Options are the webhook handler's options, the SendGrid key parsed
	// and checked.
	Options inbound.Options
}

// loadServe reads [serve]; nil without one.
func loadServe(sc *serveConfig, more bool) (*Serve, error) {
	if sc == nil {
		return nil, nil
	}
	s := &Serve{Listen: sc.Listen}
	if s.Listen == "" {
		return nil, fmt.Errorf("config: serve.listen: missing (host:port of the public webhook endpoint, e.g. 0.0.0.0:8025)")
	}
	_, port, err := net.SplitHostPort(s.Listen)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
		return nil, fmt.Errorf("config: serve.listen: %q is not host:port (e.g. 0.0.0.0:8025)", s.Listen)
	}
	if sc.Window != "" {
		if s.Options.Window, err = duration.Positive(sc.Window); err != nil || s.Options.Window > 24*time.Hour {
			return nil, fmt.Errorf("config: serve.window: %q is not a duration of at most 24h", sc.Window)
		}
	}
	if sc.MaxBody < 0 || sc.MaxBody > 64<<20 {
		return nil, fmt.Errorf("config: serve.max_body: %d is not between 1 and %d bytes", sc.MaxBody, 64<<20)
	}
	s.Options.MaxBody = sc.MaxBody
	if err := inbound.CheckUnsubscribeScope(sc.UnsubscribeScope); err != nil {
		return nil, fmt.Errorf("config: serve.unsubscribe_scope: %w", err)
	}
	s.Options.UnsubscribeScope = sc.UnsubscribeScope
	if s.Options.Policy, err = buildPolicy(sc.Suppression); err != nil {
		return nil, fmt.Errorf("config: serve.suppression.%w", err)
	}
	if sg := sc.SendGrid; sg != nil {
		key := sg.VerificationKey
		if sg.VerificationKeyEnv != "" {
			if key != "" {
				return nil, fmt.Errorf("config: serve.sendgrid: verification_key and verification_key_env are both set; keep one")
			}
			if key = os.Getenv(sg.VerificationKeyEnv); key == "" {
				return nil, fmt.Errorf("config: serve.sendgrid.verification_key_env: %s is empty or not set", sg.VerificationKeyEnv)
			}
		}
		if s.Options.SendGridKey, err = inbound.ParseSendGridKey(key); err != nil {
			return nil, fmt.Errorf("config: serve.sendgrid.verification_key: %s", strings.TrimPrefix(err.Error(), "inbound: "))
		}
	}
	if ses := sc.SES; ses != nil {
		if len(ses.TopicARNs) == 0 {
			return nil, fmt.Errorf("config: serve.ses.topic_arns: empty (the SNS topics whose messages are accepted)")
		}
		for _, arn := range ses.TopicARNs {
			if !strings.HasPrefix(arn, "arn:aws") || strings.Count(arn, ":") != 5 {
				return nil, fmt.Errorf("config: serve.ses.topic_arns: %q is not an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME)", arn)
			}
		}
		s.Options.SESTopics = ses.TopicARNs
	}
	if s.Options.SendGridKey == nil && len(s.Options.SESTopics) == 0 && !more {
		return nil, fmt.Errorf("config: serve: neither [serve.sendgrid], [serve.ses], [unsubscribe] nor [bounces]: nothing to serve")
	}
	return s, nil
}

// EventLinker returns the inbound.LinkFunc that finds a provider's message
// ids among the mails of lanes (by their provider id, an index range in
// each lane's table), so that mailspool serve stores each event with the
// lane and id of the mail it is about.
func EventLinker(ctx context.Context, db *sql.DB, lanes []Lane) (inbound.LinkFunc, error) {
	qs, err := laneQueues(ctx, db, lanes)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, ids []string) (map[string]inbound.Link, error) {
		found := map[string]inbound.Link{}
		for len(ids) > 0 {
			chunk := ids[:min(len(ids), linkChunk)]
			ids = ids[len(chunk):]
			for _, q := range qs {
				rows, err := q.List(ctx, queue.ListOptions{Filter: queue.Filter{ProviderIDs: chunk}, Limit: queue.MaxListLimit})
				if err != nil {
					return nil, fmt.Errorf("lane %s: %w", q.Lane().Name, err)
				}
				for _, r := range rows {
					if _, dup := found[r.ProviderID]; !dup {
						found[r.ProviderID] = inbound.Link{Lane: q.Lane().Name, MailID: r.ID}
					}
				}
			}
		}
		return found, nil
	}, nil
}

// laneQueues opens the queue of each lane, for the event linkers.
func laneQueues(ctx context.Context, db *sql.DB, lanes []Lane) ([]*queue.Queue, error) {
	qs := make([]*queue.Queue, 0, len(lanes))
	for _, l := range lanes {
		q, err := queue.New(ctx, db, l.Lane, nil)
		if err != nil {
			return nil, fmt.Errorf("config: lane %s: %w", l.Lane.Name, err)
		}
		qs = append(qs, q)
	}
	return qs, nil
}

// linkChunk is how many provider ids one lookup names.
const linkChunk = 200

// EventMessageLinker returns the inbound.LinkFunc that finds our
// Message-IDs (without angle brackets) among the mails of lanes, one index
// probe per id and lane: mailspool serve's second way to link an event, for
// one whose provider message id matches no mail. At most maxMessageLinks
// ids are looked up per call.
func EventMessageLinker(ctx context.Context, db *sql.DB, lanes []Lane) (inbound.LinkFunc, error) {
	qs, err := laneQueues(ctx, db, lanes)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, ids []string) (map[string]inbound.Link, error) {
		found := map[string]inbound.Link{}
		for _, id := range ids[:min(len(ids), maxMessageLinks)] {
			for _, q := range qs {
				rows, err := q.List(ctx, queue.ListOptions{Filter: queue.Filter{MessageID: id}, Limit: 1})
				if err != nil {
					return nil, fmt.Errorf("lane %s: %w", q.Lane().Name, err)
				}
				if len(rows) > 0 {
					found[id] = inbound.Link{Lane: q.Lane().Name, MailID: rows[0].ID}
					break
				}
			}
		}
		return found, nil
	}, nil
}

// maxMessageLinks bounds the Message-ID look-ups of one webhook post.
const maxMessageLinks = 1000

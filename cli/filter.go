package cli

import (
	"flag"
	"fmt"
	"time"

	"github.com/mailspool/mailspool/internal/duration"
	"github.com/mailspool/mailspool/queue"
)

// filterFlags select mail for list and retry --failed.
type filterFlags struct {
	to, template, kind, since string
}

func (f *filterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.to, "to", "", "only mail to this address (any letter case)")
	fs.StringVar(&f.template, "template", "", "only mail of this template")
	fs.StringVar(&f.kind, "kind", "", "only mail whose last outcome is this: sent, temporary, permanent, connection, expired, poison, cancelled, suppressed or held")
	fs.StringVar(&f.since, "since", "", "only mail enqueued since then: a duration back from now (2h, 7d) or an RFC 3339 time")
}

// filter builds the queue.Filter; now is the time --since counts back from.
func (f *filterFlags) filter(now time.Time) (queue.Filter, error) {
	qf := queue.Filter{To: f.to, Template: f.template, Kind: f.kind}
	switch f.kind {
	case "", "sent", "temporary", "permanent", "connection", "expired", "poison", "cancelled", "suppressed", queue.KindHeld:
	default:
		return qf, usageError{fmt.Sprintf("--kind %q: want sent, temporary, permanent, connection, expired, poison, cancelled, suppressed or held", f.kind)}
	}
	if f.since != "" {
		t, err := parseSince(f.since, now)
		if err != nil {
			return qf, usageError{err.Error()}
		}
		qf.Since = t
	}
	return qf, nil
}

// parseSince reads a duration back from now ("2h", "7d") or an RFC 3339
// time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := duration.Parse(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--since %q: want a duration back from now (90m, 2h, 7d) or an RFC 3339 time (2026-12-02T10:00:00Z)", s)
}

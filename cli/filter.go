package cli

import (
	"errors"
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
	filterVar(fs, &f.to, "to", "only mail to this address (any letter case)")
	filterVar(fs, &f.template, "template", "only mail of this template")
	filterVar(fs, &f.kind, "kind", "only mail whose last outcome is this: sent, temporary, permanent, connection, expired, poison, cancelled, suppressed or held")
	filterVar(fs, &f.since, "since", "only mail enqueued since then: a duration back from now (2h, 7d) or an RFC 3339 time")
}

// filterVar defines a string flag that narrows what a command selects or
// changes (a lane, a recipient, a template). Left out, it selects
// everything or its default; given, it must not be empty:
// "--to $ADDR" with ADDR unset would otherwise mean no filter, and
// "retry --failed --to $ADDR" retry every failed mail.
func filterVar(fs *flag.FlagSet, p *string, name, usage string) {
	fs.Var((*filterValue)(p), name, usage)
}

// filterString is filterVar returning the value's address.
func filterString(fs *flag.FlagSet, name, usage string) *string {
	p := new(string)
	filterVar(fs, p, name, usage)
	return p
}

// filterValue is the flag.Value of filterVar.
type filterValue string

var errEmptyFilter = errors.New("empty (an unset variable?): leave the flag out for its default")

func (v *filterValue) String() string {
	if v == nil {
		return ""
	}
	return string(*v)
}

func (v *filterValue) Set(s string) error {
	if s == "" {
		return errEmptyFilter
	}
	*v = filterValue(s)
	return nil
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

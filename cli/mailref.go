package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/mailspool/mailspool/config"
	"github.com/mailspool/mailspool/internal/termsafe"
	"github.com/mailspool/mailspool/queue"
)

// A mailRef names a mail as an operator types it: "ID", or "LANE/ID" where
// ids of several lanes may collide. Lane names never hold a slash.
type mailRef struct {
	lane string // empty: whichever lane has the id
	id   int64
}

func (r mailRef) String() string {
	if r.lane == "" {
		return strconv.FormatInt(r.id, 10)
	}
	return r.lane + "/" + strconv.FormatInt(r.id, 10)
}

// parseRef reads "ID" or "LANE/ID".
func parseRef(s string) (mailRef, error) {
	lane, num, hasLane := strings.Cut(s, "/")
	if !hasLane {
		num, lane = lane, ""
	}
	id, err := strconv.ParseInt(num, 10, 64)
	if err != nil || id <= 0 || (hasLane && lane == "") {
		return mailRef{}, usageError{fmt.Sprintf("%q is not a mail id (want ID or LANE/ID, e.g. 42 or bulk/42)", s)}
	}
	return mailRef{lane: lane, id: id}, nil
}

// parseRefs reads mail ids given as arguments.
func parseRefs(args []string) ([]mailRef, error) {
	refs := make([]mailRef, len(args))
	for i, a := range args {
		r, err := parseRef(a)
		if err != nil {
			return nil, err
		}
		refs[i] = r
	}
	return refs, nil
}

// refOf is a mail's id as multi-lane output prints it.
func refOf(lane string, id int64) string { return lane + "/" + strconv.FormatInt(id, 10) }

// ambiguousError: an id that more than one lane has, or a lookup that
// found several mails. It lists them, so that the operator can pick one.
type ambiguousError struct {
	what       string
	candidates []queue.Row
	lanes      []string // candidates[i]'s lane
}

func (e ambiguousError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s names %d mails; say which (LANE/ID, or --lane):", e.what, len(e.candidates))
	for i, r := range e.candidates {
		fmt.Fprintf(&b, "\n  %-16s %-8s %s  %s  %s", refOf(e.lanes[i], r.ID), r.Status, r.CreatedAt.UTC().Format("2006-01-02 15:04:05"),
			termsafe.Escape(r.To), termsafe.Escape(r.Subject))
	}
	return b.String()
}

// Candidates are the mails' LANE/ID, for the JSON error.
func (e ambiguousError) Candidates() []string {
	out := make([]string, len(e.candidates))
	for i, r := range e.candidates {
		out[i] = refOf(e.lanes[i], r.ID)
	}
	return out
}

// isUsage makes the ambiguity a usage error (exit 2): the command needs a
// lane to go on.
func (e ambiguousError) Unwrap() error { return usageError{e.Error()} }

// laneIndex returns the index of the lane named name among lanes.
func laneIndex(lanes []config.Lane, name string) (int, error) {
	var names []string
	for i, l := range lanes {
		if l.Lane.Name == name {
			return i, nil
		}
		names = append(names, l.Lane.Name)
	}
	return 0, usageError{fmt.Sprintf("no lane %q among %s", name, strings.Join(names, ", "))}
}

// locate returns the index among lanes of the lane that holds ref: the
// lane it names, the only lane there is, or the only lane whose table has
// the id. An id that several lanes have is an ambiguousError listing
// them; an id none has is queue.ErrNotFound, naming the lanes looked in.
func locate(ctx context.Context, lanes []config.Lane, qs []*queue.Queue, ref mailRef) (int, error) {
	if ref.lane != "" {
		return laneIndex(lanes, ref.lane)
	}
	if len(qs) == 1 {
		return 0, nil
	}
	amb := ambiguousError{what: "id " + ref.String()}
	at := -1
	var names []string
	for i, q := range qs {
		names = append(names, lanes[i].Lane.Name)
		r, err := q.Row(ctx, ref.id)
		if errors.Is(err, queue.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, err
		}
		at = i
		amb.candidates, amb.lanes = append(amb.candidates, r), append(amb.lanes, lanes[i].Lane.Name)
	}
	switch len(amb.candidates) {
	case 0:
		return 0, fmt.Errorf("%w: no mail %d in any lane (looked in %s)", queue.ErrNotFound, ref.id, strings.Join(names, ", "))
	case 1:
		return at, nil
	}
	return 0, amb
}

// locateAll locates refs, which must all be in one lane: an action
// (retry, cancel) reports on one lane at a time.
func locateAll(ctx context.Context, lanes []config.Lane, qs []*queue.Queue, refs []mailRef) (int, []int64, error) {
	at := -1
	ids := make([]int64, len(refs))
	for i, r := range refs {
		l, err := locate(ctx, lanes, qs, r)
		if err != nil {
			return 0, nil, err
		}
		if at >= 0 && l != at {
			return 0, nil, usageError{fmt.Sprintf("mails %s and %s are in different lanes (%s, %s): give one lane's mails at a time",
				refs[0], r, lanes[at].Lane.Name, lanes[l].Lane.Name)}
		}
		at, ids[i] = l, r.id
	}
	return at, ids, nil
}

// find looks mail up by Message-ID or provider id in every lane of qs.
func find(ctx context.Context, lanes []config.Lane, qs []*queue.Queue, f queue.Filter) ([]queue.Row, []string, error) {
	var rows []queue.Row
	var names []string
	for i, q := range qs {
		found, err := q.List(ctx, queue.ListOptions{Filter: f, Limit: 20})
		if err != nil {
			return nil, nil, fmt.Errorf("lane %s: %w", lanes[i].Lane.Name, err)
		}
		for _, r := range found {
			rows, names = append(rows, r), append(names, lanes[i].Lane.Name)
		}
	}
	return rows, names, nil
}

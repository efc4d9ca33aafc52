package statuspage

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/mailspool/mailspool/inbound"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/suppress"
)

// suppressionsView is a lane's overview section: the entries in force
// for its mail (scope all or the lane), by reason.
type suppressionsView struct {
	Reasons []suppress.ReasonCount
	Total   int64
	AtLeast bool // a reason's count reached SuppressionCountCap
}

// SuppressionCountCap is how far the overview counts each reason's
// suppressions: past it, the figure reads "1000+" (the suppression list
// page shows them all). Counting is then one bounded index range per
// reason, however long the list is.
const SuppressionCountCap = 1000

func loadSuppressions(ctx context.Context, p *Page, q *queue.Queue) (any, error) {
	rc, err := p.opts.Suppressions.CountByReason(ctx, q.Lane().Name, SuppressionCountCap)
	if err != nil {
		return nil, err
	}
	v := suppressionsView{Reasons: rc}
	for _, r := range rc {
		v.Total += r.Count
		v.AtLeast = v.AtLeast || r.AtLeast
	}
	return v, nil
}

// lastEventsView is a lane's overview section: the last provider event
// about the lane's mail, and the last the webhook endpoint received at
// all (a stalled endpoint shows as an old one).
type lastEventsView struct {
	Lane, Any *inbound.Event
	Now       time.Time
}

func loadLastEvents(ctx context.Context, p *Page, q *queue.Queue) (any, error) {
	lane, err := p.opts.Events.Last(ctx, q.Lane().Name)
	if err != nil {
		return nil, err
	}
	anyEv, err := p.opts.Events.Last(ctx, "")
	if err != nil {
		return nil, err
	}
	return lastEventsView{Lane: lane, Any: anyEv, Now: time.Now()}, nil
}

// suppressionPage is one page of the suppression list, newest first.
type suppressionPage struct {
	Reasons []suppress.Reason
	Reason  string
	Scope   string
	Address string
	Entries []suppress.Entry
	// Older is the before= of the next page (unix ms; 0: none) and
	// OlderSkip its skip=: the entries made in that millisecond already
	// shown (an import makes many in one), so that none is skipped or
	// shown twice and no address goes into a link.
	Older, OlderSkip int64
}

// suppressionPageSize is how many entries a page of the list shows.
const suppressionPageSize = 100

// suppressions serves the suppression list: ?reason=, ?scope=, ?address=
// select, ?before= and ?skip= (from the "older" link) page: entries made
// at or before the millisecond before, less the first skip of them. Each
// page is one index range read (newest first), however long the list.
func (p *Page) suppressions(w http.ResponseWriter, r *http.Request) {
	qv := r.URL.Query()
	v := suppressionPage{Reasons: suppress.Reasons, Reason: qv.Get("reason"), Scope: qv.Get("scope"), Address: qv.Get("address")}
	f := suppress.Filter{Scope: v.Scope, Address: v.Address, Limit: suppressionPageSize + 1}
	if v.Reason != "" {
		reason, err := suppress.ParseReason(v.Reason)
		if err != nil {
			p.fail(w, r, http.StatusBadRequest, err.Error())
			return
		}
		f.Reason = reason
	}
	var before, skip int64
	if b := qv.Get("before"); b != "" {
		var err error
		if before, err = strconv.ParseInt(b, 10, 64); err != nil || before <= 0 {
			p.fail(w, r, http.StatusBadRequest, "before: want the unix time in milliseconds of the oldest entry shown (the older link's)")
			return
		}
		if sk := qv.Get("skip"); sk != "" {
			if skip, err = strconv.ParseInt(sk, 10, 64); err != nil || skip < 0 || skip > 1<<31 {
				p.fail(w, r, http.StatusBadRequest, "skip: want how many entries of the before millisecond were shown (the older link's)")
				return
			}
		}
		f.Until, f.Offset = time.UnixMilli(before+1), int(skip)
	}
	es, err := p.opts.Suppressions.Entries(r.Context(), f)
	if err != nil {
		status := http.StatusInternalServerError
		if v.Scope != "" || v.Address != "" {
			status = http.StatusBadRequest // a scope or an address that does not parse
		}
		p.fail(w, r, status, err.Error())
		return
	}
	if len(es) > suppressionPageSize {
		es = es[:suppressionPageSize]
		v.Older = es[len(es)-1].CreatedAt.UnixMilli()
		for _, e := range es {
			if e.CreatedAt.UnixMilli() == v.Older {
				v.OlderSkip++
			}
		}
		if v.Older == before {
			v.OlderSkip += skip // still in the same millisecond
		}
	}
	v.Entries = es
	p.render(w, r, http.StatusOK, "suppressions.html", view{Title: "suppression list", Data: v})
}

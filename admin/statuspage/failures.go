package statuspage

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/mailspool/mailspool/queue"
)

// failuresLimit is how many mails the page of one rule lists.
const failuresLimit = 100

type laneFailures struct {
	Lane  string
	Rules []queue.RuleFailures
	Err   string
}

// failures lists every lane's failures of the window, by rule.
func (p *Page) failures(w http.ResponseWriter, r *http.Request) {
	var out []laneFailures
	for _, q := range p.lanes {
		name := q.Lane().Name
		// The overview's figures: one read serves both pages.
		val, _, err := p.cache.get(r.Context(), "failures\x00"+name, func(ctx context.Context) (any, error) { return loadTopFailures(ctx, p, q) })
		lf := laneFailures{Lane: name}
		if err != nil {
			lf.Err = err.Error()
		} else {
			lf.Rules = val.(topFailuresView).All
		}
		out = append(out, lf)
	}
	p.render(w, r, http.StatusOK, "failures.html", view{Title: "failures by rule", Data: out})
}

type failedByView struct {
	Lane, Rule, Kind string
	Rows             []queue.Row
	Limit            int
}

// failedBy lists the mails one rule failed in the window.
func (p *Page) failedBy(w http.ResponseWriter, r *http.Request) {
	q := p.lane(w, r)
	if q == nil {
		return
	}
	rule, kind := r.URL.Query().Get("rule"), r.URL.Query().Get("kind")
	if kind == "" {
		p.fail(w, r, http.StatusBadRequest, "say which failures with ?rule=R&kind=K (the failures page links them)")
		return
	}
	rows, err := q.FailedBy(r.Context(), rule, kind, time.Now().Add(-FailureWindow), failuresLimit)
	if err != nil {
		p.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	title := fmt.Sprintf("%s failures by %s", kind, ruleName(rule))
	p.render(w, r, http.StatusOK, "failed.html", view{Title: title,
		Data: failedByView{Lane: q.Lane().Name, Rule: rule, Kind: kind, Rows: rows, Limit: failuresLimit}})
}

// ruleName is how a rule is shown: failures no rule decided say so.
func ruleName(rule string) string {
	if rule == "" {
		return "no rule"
	}
	return "rule " + rule
}

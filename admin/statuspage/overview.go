package statuspage

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/mailspool/mailspool/queue"
)

// section is one block of a lane's figures on the overview: load reads
// them for one lane (at most once per CacheFor), and the template
// "section-NAME" in templates/sections.html shows them. A capability that
// has figures of its own (suppressions by reason, throttle use, the members
// of a composite transport, the last provider event) adds an entry here,
// with its load function in a file of its own.
type section struct {
	name string
	load func(ctx context.Context, p *Page, q *queue.Queue) (any, error)
	// on says whether the page shows the section (nil: always).
	on func(o *Options) bool
}

var sections = []section{
	{"queue", func(ctx context.Context, _ *Page, q *queue.Queue) (any, error) { return q.Stats(ctx) }, nil},
	{"state", func(ctx context.Context, _ *Page, q *queue.Queue) (any, error) { return q.Paused(ctx) }, nil},
	{"failures", loadTopFailures, nil},
	{"suppressions", loadSuppressions, func(o *Options) bool { return o.Suppressions != nil }},
	{"events", loadLastEvents, func(o *Options) bool { return o.Events != nil }},
}

// sectionsOn returns the sections the page shows under o.
func sectionsOn(o *Options) []section {
	var out []section
	for _, s := range sections {
		if s.on == nil || s.on(o) {
			out = append(out, s)
		}
	}
	return out
}

// FailureWindow is how far back the failures by rule reach.
const FailureWindow = 24 * time.Hour

// topFailures is how many rules the overview lists per lane.
const topFailures = 5

type topFailuresView struct {
	All   []queue.RuleFailures // every rule, for the failures page
	Rules []queue.RuleFailures // the first topFailures
	More  int                  // rules not in Rules
}

func loadTopFailures(ctx context.Context, _ *Page, q *queue.Queue) (any, error) {
	fs, err := q.FailuresByRule(ctx, time.Now().Add(-FailureWindow))
	if err != nil {
		return nil, err
	}
	v := topFailuresView{All: fs, Rules: fs}
	if len(fs) > topFailures {
		v.Rules, v.More = fs[:topFailures], len(fs)-topFailures
	}
	return v, nil
}

// laneView is one lane on the overview.
type laneView struct {
	Name     string
	Table    string
	Sections []sectionView
}

type sectionView struct {
	Name string
	Lane string
	Base string // the page's root, for links
	Data any
	Err  string
	At   time.Time // when the figures were read
}

func (p *Page) overview(w http.ResponseWriter, r *http.Request) {
	root := base(r)
	lanes := make([]laneView, len(p.lanes))
	// Every lane's sections are read at once: a page of cold figures
	// waits for the slowest read, not for their sum.
	var wg sync.WaitGroup
	for i, q := range p.lanes {
		l := &lanes[i]
		*l = laneView{Name: q.Lane().Name, Table: q.Lane().Table, Sections: make([]sectionView, len(p.sections))}
		for j, s := range p.sections {
			wg.Go(func() {
				val, at, err := p.cache.get(r.Context(), s.name+"\x00"+l.Name, func(ctx context.Context) (any, error) { return s.load(ctx, p, q) })
				sv := sectionView{Name: s.name, Lane: l.Name, Base: root, Data: val, At: at}
				if err != nil {
					sv.Err = err.Error()
				}
				l.Sections[j] = sv
			})
		}
	}
	wg.Wait()
	p.render(w, r, http.StatusOK, "overview.html", view{Title: "mail queue", Refresh: 15, Data: lanes})
}

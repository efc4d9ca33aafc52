package statuspage

import (
	"bytes"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mailspool/mailspool/inbound"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/suppress"
)

//go:embed templates/*.html templates/style.css
var files embed.FS

// Options configure a Page. Zero fields take the defaults shown.
type Options struct {
	// Credentials, when set, are required on every request. Leave them
	// unset only on loopback (CheckListen) or behind the application's own
	// authentication.
	Credentials Credentials
	// Actions adds the retry, cancel, pause and resume buttons; without it
	// the page is read-only and every request but GET and HEAD is answered
	// 405.
	Actions bool
	// ShowAddresses shows recipient addresses in full; by default they are
	// masked (j***@example.com).
	ShowAddresses bool
	// CacheFor is how long the overview's figures are reused before they
	// are read again (default 5s). Figures up to four times that old are
	// shown while a fresh read runs in the background; older ones are read
	// while the request waits.
	CacheFor time.Duration
	// Logger receives a line per action, with who did it (default
	// slog.Default()).
	Logger *slog.Logger
	// Suppressions, when set, adds each lane's suppressions by reason to
	// the overview and the suppression list page (/suppressions).
	Suppressions *suppress.List
	// Events, when set, adds the last provider event received, the lane's
	// and any, to the overview (package inbound, mailspool serve).
	Events *inbound.Store
}

// DefaultCacheFor is the default Options.CacheFor.
const DefaultCacheFor = 5 * time.Second

// Page is the status page of some lanes. It is safe for concurrent use.
type Page struct {
	lanes  []*queue.Queue
	byName map[string]*queue.Queue
	opts   Options
	log    *slog.Logger

	mux      *http.ServeMux
	sections []section // those the overview shows
	tmpl     *template.Template
	cache    *cache
	csrfKey  []byte
	origin   *http.CrossOriginProtection
}

// New returns the status page of lanes, shown in the order given. nil
// opts means defaults.
func New(lanes []*queue.Queue, opts *Options) (*Page, error) {
	if len(lanes) == 0 {
		return nil, errors.New("statuspage: no lanes")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := o.Credentials.check(); err != nil {
		return nil, err
	}
	if o.CacheFor == 0 {
		o.CacheFor = DefaultCacheFor
	}
	if o.CacheFor < 0 {
		return nil, fmt.Errorf("statuspage: negative CacheFor %v", o.CacheFor)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	p := &Page{lanes: lanes, byName: map[string]*queue.Queue{}, opts: o, log: o.Logger,
		cache: newCache(o.CacheFor), csrfKey: make([]byte, 32), origin: http.NewCrossOriginProtection()}
	for _, q := range lanes {
		name := q.Lane().Name
		if _, dup := p.byName[name]; dup {
			return nil, fmt.Errorf("statuspage: lane %s given twice", name)
		}
		p.byName[name] = q
	}
	_, _ = rand.Read(p.csrfKey)
	p.sections = sectionsOn(&p.opts)
	var err error
	if p.tmpl, err = p.parse(); err != nil {
		return nil, err
	}
	p.mux = http.NewServeMux()
	p.mux.HandleFunc("GET /{$}", p.overview)
	p.mux.HandleFunc("GET /failures", p.failures)
	p.mux.HandleFunc("GET /lanes/{lane}/failures", p.failedBy)
	p.mux.HandleFunc("GET /lanes/{lane}/mail/{id}", p.mail)
	p.mux.HandleFunc("GET /mail", p.findMail)
	p.mux.HandleFunc("GET /style.css", p.style)
	if o.Suppressions != nil {
		p.mux.HandleFunc("GET /suppressions", p.suppressions)
	}
	if o.Actions {
		p.mux.HandleFunc("POST /lanes/{lane}/mail/{id}/{action}", p.mailAction)
		p.mux.HandleFunc("POST /lanes/{lane}/{action}", p.laneAction)
	}
	p.mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		p.fail(w, r, http.StatusNotFound, "no such page")
	})
	return p, nil
}

// ServeHTTP checks the credentials and the method, then serves the page.
func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	who, ok := p.authorize(r)
	if !ok {
		p.challenge(w)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !(p.opts.Actions && r.Method == http.MethodPost) {
		h.Set("Allow", "GET, HEAD")
		p.fail(w, r, http.StatusMethodNotAllowed, "the status page is read-only (actions = true in [status_page] enables its buttons)")
		return
	}
	p.mux.ServeHTTP(w, r.WithContext(withWho(r.Context(), who)))
}

// view is what every page's template gets.
type view struct {
	Title   string
	Base    string // the page's root as the browser sees it, ending in /
	Refresh int    // seconds; 0: no reload
	Now     time.Time
	Actions bool
	Masked  bool
	CSRF    string
	Lanes   []string
	// Suppressions: the suppression list page exists (a link in the
	// header).
	Suppressions bool
	Done         string // what the last action did
	Data         any
}

// render executes the named template with v.
func (p *Page) render(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	v.Base = base(r)
	v.Now = time.Now()
	v.Actions = p.opts.Actions
	v.Masked = !p.opts.ShowAddresses
	v.Suppressions = p.opts.Suppressions != nil
	if p.opts.Actions {
		v.CSRF = p.csrfToken(who(r.Context()), v.Now)
	}
	for _, q := range p.lanes {
		v.Lanes = append(v.Lanes, q.Lane().Name)
	}
	v.Done = r.URL.Query().Get("done")
	var buf bytes.Buffer
	if err := p.tmpl.ExecuteTemplate(&buf, name, v); err != nil {
		p.log.Error("status page: rendering", "template", name, "err", err)
		http.Error(w, "statuspage: rendering the page failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail answers with an error page saying msg.
func (p *Page) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	p.render(w, r, status, "error.html", view{Title: http.StatusText(status), Data: msg})
}

func (p *Page) style(w http.ResponseWriter, r *http.Request) {
	b, _ := files.ReadFile("templates/style.css")
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	_, _ = w.Write(b)
}

// base returns the path of the page's root as the browser asked for it,
// so that links work under http.StripPrefix: the request URI ends with
// the path the page sees.
func base(r *http.Request) string {
	u, err := url.ParseRequestURI(r.RequestURI)
	if err != nil {
		return "/"
	}
	full, seen := u.Path, r.URL.Path
	if seen == "" {
		seen = "/"
	}
	if !strings.HasSuffix(full, seen) {
		return "/"
	}
	return strings.TrimSuffix(full[:len(full)-len(seen)], "/") + "/"
}

// lane returns the lane the request's {lane} names, or answers 404.
func (p *Page) lane(w http.ResponseWriter, r *http.Request) *queue.Queue {
	q := p.byName[r.PathValue("lane")]
	if q == nil {
		p.fail(w, r, http.StatusNotFound, fmt.Sprintf("no lane %q on this page", r.PathValue("lane")))
	}
	return q
}

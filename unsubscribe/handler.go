package unsubscribe

import (
	"errors"
	"html/template"
	"log/slog"
	"mime"
	"net/http"
	"strings"

	"github.com/mailspool/mailspool/suppress"
)

// Prefix is the path Handler serves under.
const Prefix = "/u/"

// maxForm bounds a one-click POST's body: the form has one field.
const maxForm = 16 << 10

// Handler serves /u/TOKEN; see the package documentation.
type Handler struct {
	signer *Signer
	list   *suppress.List
	log    *slog.Logger
	// ObserveFunc, when not nil, is told of each request by its outcome:
	// "unsubscribed", "already", "page", "invalid", "bad_request" (metrics).
	ObserveFunc func(outcome string)
}

// NewHandler returns the handler that verifies tokens with s and records
// unsubscribes in list. A nil log is slog.Default().
func NewHandler(s *Signer, list *suppress.List, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.Default()
	}
	return &Handler{signer: s, list: list, log: log}
}

func (h *Handler) observe(outcome string) {
	if h.ObserveFunc != nil {
		h.ObserveFunc(outcome)
	}
}

var page = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="robots" content="noindex">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{if .Done}}Unsubscribed{{else}}Unsubscribe{{end}}</title></head>
<body style="font-family: sans-serif; max-width: 32em; margin: 3em auto">
{{if .Done}}<p>{{.Recipient}} will receive no more mail of the list “{{.List}}”.</p>
{{else}}<p>Stop mail of the list “{{.List}}” to {{.Recipient}}?</p>
<form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click">
<button type="submit">Unsubscribe</button></form>
<p>Nothing changes until you press the button.</p>{{end}}
</body></html>
`))

// ServeHTTP answers GET, HEAD and POST /u/TOKEN.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Cache-Control", "no-store")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Robots-Tag", "noindex")
	hd.Set("X-Content-Type-Options", "nosniff")
	tok, _ := strings.CutPrefix(r.URL.Path, Prefix)
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodPost {
		hd.Set("Allow", "GET, HEAD, POST")
		http.Error(w, "unsubscribe: GET shows the page, POST unsubscribes", http.StatusMethodNotAllowed)
		return
	}
	c, ok := h.signer.Verify(tok)
	if !ok {
		h.observe("invalid")
		http.Error(w, "unsubscribe: no such link", http.StatusNotFound)
		return
	}
	data := struct {
		List, Recipient string
		Done            bool
	}{List: c.List, Recipient: c.Recipient}
	if r.Method != http.MethodPost {
		h.observe("page") // never a write: scanners fetch every link
		hd.Set("Content-Type", "text/html; charset=utf-8")
		if r.Method == http.MethodHead {
			return
		}
		_ = page.Execute(w, data)
		return
	}
	if err := oneClick(w, r); err != nil {
		h.observe("bad_request")
		http.Error(w, "unsubscribe: "+err.Error(), http.StatusBadRequest)
		return
	}
	already, err := h.record(r, c)
	if err != nil {
		h.log.Error("unsubscribe not recorded", "list", c.List, "err", err)
		http.Error(w, "unsubscribe: not recorded; try again", http.StatusServiceUnavailable)
		return
	}
	if already {
		h.observe("already")
	} else {
		h.observe("unsubscribed")
	}
	data.Done = true
	hd.Set("Content-Type", "text/html; charset=utf-8")
	_ = page.Execute(w, data)
}

// oneClick checks that the POST's body is List-Unsubscribe=One-Click, in
// either encoding RFC 8058 allows.
func oneClick(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case err != nil:
		return errors.New("the body must be a form: List-Unsubscribe=One-Click")
	case mt == "multipart/form-data":
		err = r.ParseMultipartForm(maxForm)
	case mt == "application/x-www-form-urlencoded":
		err = r.ParseForm()
	default:
		return errors.New("content type " + mt + ": want application/x-www-form-urlencoded or multipart/form-data")
	}
	if err != nil {
		return errors.New("the form does not parse")
	}
	if r.PostFormValue("List-Unsubscribe") != "One-Click" {
		return errors.New("the form lacks List-Unsubscribe=One-Click")
	}
	return nil
}

// record suppresses c's recipient in c's list's scope, unless an
// unsubscribe is there already (a second click changes nothing).
func (h *Handler) record(r *http.Request, c Claim) (already bool, err error) {
	have, err := h.list.Entries(r.Context(), suppress.Filter{Address: c.Recipient, Scope: c.List, Reason: suppress.Unsubscribe, Limit: 1})
	if err != nil {
		return false, err
	}
	if len(have) > 0 {
		return true, nil
	}
	_, err = h.list.Add(r.Context(), suppress.Entry{Address: c.Recipient, Scope: c.List, Reason: suppress.Unsubscribe, Source: "unsubscribe:" + c.MailID})
	return false, err
}

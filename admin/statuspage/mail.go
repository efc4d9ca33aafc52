package statuspage

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/transport"
)

type mailView struct {
	Lane     string
	Row      queue.Row
	Message  *transport.Message
	BodyErr  string // the bodies could not be read
	CanRetry bool
	CanCancl bool
}

// mail shows one mail, as "mailspool show --full" prints it.
func (p *Page) mail(w http.ResponseWriter, r *http.Request) {
	q := p.lane(w, r)
	if q == nil {
		return
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		p.fail(w, r, http.StatusBadRequest, fmt.Sprintf("%q is not a mail id", r.PathValue("id")))
		return
	}
	row, err := q.Row(r.Context(), id)
	if errors.Is(err, queue.ErrNotFound) {
		p.fail(w, r, http.StatusNotFound, fmt.Sprintf("no mail %d in lane %s", id, q.Lane().Name))
		return
	}
	if err != nil {
		p.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	v := mailView{Lane: q.Lane().Name, Row: row,
		CanRetry: row.Status == "retry" || row.Status == "failed",
		CanCancl: row.Status == "pending" || row.Status == "retry"}
	if v.Message, err = q.Message(r.Context(), id); err != nil {
		v.BodyErr = err.Error()
	}
	p.render(w, r, http.StatusOK, "mail.html", view{Title: fmt.Sprintf("mail %d in lane %s", id, v.Lane), Data: v})
}

// findMail sends the lookup form (?lane=L&id=N) to the mail's page.
func (p *Page) findMail(w http.ResponseWriter, r *http.Request) {
	lane, id := r.URL.Query().Get("lane"), r.URL.Query().Get("id")
	if _, ok := p.byName[lane]; !ok {
		p.fail(w, r, http.StatusNotFound, fmt.Sprintf("no lane %q on this page", lane))
		return
	}
	if n, err := strconv.ParseInt(id, 10, 64); err != nil || n <= 0 {
		p.fail(w, r, http.StatusBadRequest, fmt.Sprintf("%q is not a mail id", id))
		return
	}
	http.Redirect(w, r, base(r)+"lanes/"+url.PathEscape(lane)+"/mail/"+id, http.StatusSeeOther)
}

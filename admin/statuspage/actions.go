package statuspage

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/mailspool/mailspool/queue"
)

// csrfToken is the token the forms of a page for who carry: an HMAC of
// who and the hour under a key of this process, good for the hour it was
// made in and the next.
func (p *Page) csrfToken(who string, t time.Time) string {
	m := hmac.New(sha256.New, p.csrfKey)
	fmt.Fprintf(m, "%s\x00%d", who, t.Unix()/3600)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkPost refuses a POST from another site or without a good token.
func (p *Page) checkPost(w http.ResponseWriter, r *http.Request) bool {
	if err := p.origin.Check(r); err != nil {
		p.fail(w, r, http.StatusForbidden, "refused: the request came from another site ("+err.Error()+")")
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	got := r.PostFormValue("csrf")
	now := time.Now()
	for _, t := range []time.Time{now, now.Add(-time.Hour)} {
		if got != "" && hmac.Equal([]byte(got), []byte(p.csrfToken(who(r.Context()), t))) {
			return true
		}
	}
	p.fail(w, r, http.StatusForbidden, "refused: the form's CSRF token is missing or stale; reload the page and try again")
	return false
}

// mailAction retries or cancels one mail.
func (p *Page) mailAction(w http.ResponseWriter, r *http.Request) {
	q := p.lane(w, r)
	if q == nil || !p.checkPost(w, r) {
		return
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		p.fail(w, r, http.StatusBadRequest, fmt.Sprintf("%q is not a mail id", r.PathValue("id")))
		return
	}
	action := r.PathValue("action")
	switch action {
	case "retry":
		_, err = q.Retry(r.Context(), id)
	case "cancel":
		_, err = q.Cancel(r.Context(), id)
	default:
		p.fail(w, r, http.StatusNotFound, fmt.Sprintf("no action %q on a mail (retry or cancel)", action))
		return
	}
	p.logAction(r, action, q, id, err)
	switch {
	case errors.Is(err, queue.ErrNotFound):
		p.fail(w, r, http.StatusNotFound, err.Error())
	case errors.Is(err, queue.ErrWrongState):
		p.fail(w, r, http.StatusConflict, err.Error())
	case err != nil:
		p.fail(w, r, http.StatusInternalServerError, err.Error())
	default:
		http.Redirect(w, r, base(r)+"lanes/"+url.PathEscape(q.Lane().Name)+"/mail/"+strconv.FormatInt(id, 10)+"?done="+action, http.StatusSeeOther)
	}
}

// laneAction pauses or resumes a lane.
func (p *Page) laneAction(w http.ResponseWriter, r *http.Request) {
	q := p.lane(w, r)
	if q == nil || !p.checkPost(w, r) {
		return
	}
	action := r.PathValue("action")
	var err error
	switch action {
	case "pause":
		err = q.Pause(r.Context(), "paused on the status page by "+who(r.Context()))
	case "resume":
		err = q.Resume(r.Context())
	default:
		p.fail(w, r, http.StatusNotFound, fmt.Sprintf("no action %q on a lane (pause or resume)", action))
		return
	}
	p.logAction(r, action, q, 0, err)
	if err != nil {
		p.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	p.cache.forget("state\x00" + q.Lane().Name)
	http.Redirect(w, r, base(r)+"?done="+action, http.StatusSeeOther)
}

// logAction records who did what; id 0 is a lane action.
func (p *Page) logAction(r *http.Request, action string, q *queue.Queue, id int64, err error) {
	args := []any{"action", action, "lane", q.Lane().Name, "by", who(r.Context()), "remote", r.RemoteAddr}
	if id != 0 {
		args = append(args, "id", id)
	}
	if err != nil {
		p.log.Warn("status page action refused", append(args, "err", err)...)
		return
	}
	p.log.Info("status page action", args...)
}

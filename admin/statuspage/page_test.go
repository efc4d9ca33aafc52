package statuspage_test

import (
	"bytes"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mailspool/mailspool/admin/statuspage"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/suppress"
	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// server serves a status page of s's lane.
func server(t *testing.T, s seeded, o *statuspage.Options) *httptest.Server {
	t.Helper()
	p, err := statuspage.New([]*queue.Queue{s.q}, o)
	require.NoError(t, err)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv
}

// client does not follow redirects: the tests look at them.
var client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

type answer struct {
	code int
	head http.Header
	body string
}

func do(t *testing.T, method, u string, body url.Values, edit func(*http.Request)) answer {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = strings.NewReader(body.Encode())
	}
	req, err := http.NewRequest(method, u, r)
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if edit != nil {
		edit(req)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func get(t *testing.T, u string) answer {
	t.Helper()
	return do(t, http.MethodGet, u, nil, nil)
}

var figureRE = regexp.MustCompile(`data-figure="([a-z_-]+)"[^>]*>([^<]*)<`)

// figures reads the data-figure values of a page.
func figures(body string) map[string]string {
	out := map[string]string{}
	for _, m := range figureRE.FindAllStringSubmatch(body, -1) {
		out[m[1]] = strings.TrimSpace(m[2])
	}
	return out
}

func TestPages(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *sql.DB) {
		s := seed(t, db)
		srv := server(t, s, nil)

		a := get(t, srv.URL+"/")
		require.Equal(t, http.StatusOK, a.code, a.body)
		assert.Equal(t, "text/html; charset=utf-8", a.head.Get("Content-Type"))
		assert.Contains(t, a.head.Get("Content-Security-Policy"), "default-src 'none'")
		f := figures(a.body)
		assert.Equal(t, "3", f["backlog"])
		assert.Equal(t, "2", f["sent-last-hour"])
		assert.Equal(t, "2", f["failed-last-hour"])
		assert.Equal(t, "50.0 %", f["failure-rate"])
		assert.Equal(t, "1", f["sending"])
		assert.Equal(t, "0 stuck", f["stuck"])
		assert.Regexp(t, `^(4m5\d|5m0\d)s$`, f["oldest-due"], "carl's retry has been due for 5 minutes")
		assert.Contains(t, a.body, "claiming", "not paused")
		assert.Contains(t, a.body, `href="/lanes/transactional/failures?rule=smtp-5.1.1&amp;kind=permanent">rule smtp-5.1.1</a>`)
		assert.Contains(t, a.body, "read-only")
		assert.NotContains(t, a.body, "<form class=\"act\"", "no buttons when read-only")

		a = get(t, srv.URL+"/failures")
		require.Equal(t, http.StatusOK, a.code, a.body)
		assert.Regexp(t, `rule smtp-5.1.1</a></td><td>permanent</td><td class="n">2</td>`, a.body)

		a = get(t, srv.URL+"/lanes/transactional/failures?rule=smtp-5.1.1&kind=permanent")
		require.Equal(t, http.StatusOK, a.code, a.body)
		bob, fred := fmt.Sprintf(`/lanes/transactional/mail/%d"`, s.ids["bob"]), fmt.Sprintf(`/lanes/transactional/mail/%d"`, s.ids["fred"])
		require.Contains(t, a.body, bob)
		require.Contains(t, a.body, fred)
		assert.Less(t, strings.Index(a.body, bob), strings.Index(a.body, fred), "the newest failure first")
		assert.NotContains(t, a.body, "carl", "a failure of another rule")

		a = get(t, fmt.Sprintf("%s/lanes/transactional/mail/%d", srv.URL, s.ids["bob"]))
		require.Equal(t, http.StatusOK, a.code, a.body)
		assert.Contains(t, a.body, `<span class="status failed">failed</span>`)
		assert.Contains(t, a.body, "rule smtp-5.1.1")
		assert.Contains(t, a.body, `<th>about</th><td data-field="scope">recipient</td>`, "the scope, as show prints it")
		assert.Contains(t, a.body, "<details><summary>text body")
		assert.Contains(t, a.body, "<details><summary>HTML body")
		assert.Contains(t, a.body, "&lt;script&gt;alert(1)&lt;/script&gt;", "the HTML body is shown as escaped source")
		assert.NotContains(t, a.body, "<script>")

		for path, code := range map[string]int{
			"/nowhere":                      http.StatusNotFound,
			"/lanes/nope/mail/1":            http.StatusNotFound,
			"/lanes/transactional/mail/99":  http.StatusNotFound,
			"/lanes/transactional/mail/x":   http.StatusBadRequest,
			"/lanes/transactional/mail/-1":  http.StatusBadRequest,
			"/lanes/transactional/failures": http.StatusBadRequest,
			"/mail?lane=nope&id=1":          http.StatusNotFound,
			"/mail?lane=transactional&id=":  http.StatusBadRequest,
		} {
			a := get(t, srv.URL+path)
			assert.Equal(t, code, a.code, path)
			assert.Contains(t, a.body, `<p class="error">`, path)
		}
		a = get(t, fmt.Sprintf("%s/mail?lane=transactional&id=%d", srv.URL, s.ids["bob"]))
		assert.Equal(t, http.StatusSeeOther, a.code)
		assert.Equal(t, fmt.Sprintf("/lanes/transactional/mail/%d", s.ids["bob"]), a.head.Get("Location"))

		a = get(t, srv.URL+"/style.css")
		assert.Equal(t, http.StatusOK, a.code)
		assert.Equal(t, "text/css; charset=utf-8", a.head.Get("Content-Type"))
	})
}

// pagesOf returns every page the seeded lane has, by path.
func pagesOf(s seeded) []string {
	paths := []string{"/", "/failures", "/lanes/transactional/failures?rule=smtp-5.1.1&kind=permanent"}
	for _, id := range s.ids {
		paths = append(paths, fmt.Sprintf("/lanes/transactional/mail/%d", id))
	}
	return paths
}

func TestAddressesMasked(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *sql.DB) {
		s := seed(t, db)
		masked, shown := server(t, s, nil), server(t, s, &statuspage.Options{ShowAddresses: true})
		for _, path := range pagesOf(s) {
			a := get(t, masked.URL+path)
			require.Equal(t, http.StatusOK, a.code, path)
			for who := range s.ids {
				assert.NotContains(t, a.body, who+"@example.com", "%s shows %s's address", path, who)
			}
		}
		page := fmt.Sprintf("/lanes/transactional/mail/%d", s.ids["bob"])
		a := get(t, masked.URL+page)
		assert.Contains(t, a.body, `<td data-field="to">b***@example.com</td>`)
		assert.Contains(t, a.body, "550 5.1.1 &lt;b***@example.com&gt;: Recipient address rejected", "the reply quoting it too")
		assert.Contains(t, a.body, "Hello b***@example.com,", "and the body")
		assert.NotContains(t, a.body, "Bob Doe", "the recipient's name is personal data too")
		assert.Contains(t, a.body, "noreply@shop.example", "the sender is ours: not masked")
		assert.Contains(t, a.body, "addresses masked")

		a = get(t, shown.URL+page)
		assert.Contains(t, a.body, `<td data-field="to">bob@example.com</td>`)
		assert.Contains(t, a.body, "550 5.1.1 &lt;bob@example.com&gt;")
		assert.Contains(t, a.body, "Bob Doe")
		assert.NotContains(t, a.body, "addresses masked")
	})
}

// An address in a preferences or unsubscribe link is percent-encoded
// (%40): masked in the headers and both bodies too.
func TestAddressesMaskedWhenURLEncoded(t *testing.T) {
	db := sqliteDB(t)
	s := seed(t, db)
	id, err := s.q.Enqueue(t.Context(), db, &transport.Message{
		From:    mail.Address{Address: "noreply@shop.example"},
		To:      mail.Address{Address: "zoe.secret@example.com"},
		Subject: "Your weekly news",
		Text:    "Manage your preferences: https://shop.example/prefs?email=zoe.secret%40example.com",
		HTML:    `<a href="https://shop.example/prefs?email=zoe.secret%40example.com">preferences</a>`,
		Headers: []transport.Header{{Name: "List-Unsubscribe", Value: "<https://shop.example/unsub?u=zoe.secret%40example.com>"}},
	})
	require.NoError(t, err)
	srv := server(t, s, nil) // ShowAddresses false: masked
	a := get(t, fmt.Sprintf("%s/lanes/transactional/mail/%d", srv.URL, id))
	require.Equal(t, http.StatusOK, a.code)
	assert.Contains(t, a.body, `<td data-field="to">z***@example.com</td>`, "the To field is masked")
	assert.NotContains(t, a.body, "zoe.secret", "the recipient's local part must not appear anywhere on a masked page")
	assert.Contains(t, a.body, "%40example.com", "the domain stays")
}

// A local part may have ' & / = ?: the whole of it is masked, not only
// what follows the last of them.
func TestAddressesMaskedWholeLocalPart(t *testing.T) {
	db := sqliteDB(t)
	s := seed(t, db)
	id, err := s.q.Enqueue(t.Context(), db, &transport.Message{
		From:    mail.Address{Address: "noreply@shop.example"},
		To:      mail.Address{Address: "tom&jerry@example.com"},
		Subject: "Hello",
		Text:    "Dear customer (tom&jerry@example.com), o'brien@example.com asked us to write.",
		HTML:    "<p>Dear tom&amp;jerry@example.com, o&#39;brien@example.com asked us to write.</p>",
	})
	require.NoError(t, err)
	srv := server(t, s, nil)
	a := get(t, fmt.Sprintf("%s/lanes/transactional/mail/%d", srv.URL, id))
	require.Equal(t, http.StatusOK, a.code)
	assert.Contains(t, a.body, `<td data-field="to">t***@example.com</td>`)
	assert.NotContains(t, a.body, "tom&amp;j", "the text body shows the local part up to the '&'")
	assert.NotContains(t, a.body, "o&#39;b", "and up to the apostrophe")
	assert.NotContains(t, a.body, "tom&amp;amp;j", "the HTML body, as source, up to the '&amp;'")
	assert.NotContains(t, a.body, "o&amp;#39;b", "and up to the '&#39;'")
	assert.Contains(t, a.body, "(t***@example.com), o***@example.com asked")
}

// Other stored text the page shows may quote an address too: an
// operator's pause reason, the error reading a mail's stored headers, a
// suppression's source. Masked like the rest.
func TestAddressesMaskedInOtherTexts(t *testing.T) {
	db := sqliteDB(t)
	s := seed(t, db)
	o := seedDeliverability(t, db, s)
	require.NoError(t, s.q.Pause(t.Context(), "complaint from zoe.secret@example.com"))
	// Stored headers that do not parse: the error quotes their start.
	id := s.ids["carl"]
	for _, q := range []string{`UPDATE mail_queue SET headers = ? WHERE id = ?`, `UPDATE mail_queue_bodies SET headers = ? WHERE id = (SELECT body_id FROM mail_queue WHERE id = ?)`} {
		_, err := db.Exec(q, `[["X-To","zoe.secret@example.com"]`, id)
		require.NoError(t, err)
	}
	l := o.Suppressions
	_, err := l.Add(t.Context(), suppress.Entry{Address: "zoe.secret@example.com", Reason: suppress.Manual, Source: "import:zoe.secret@example.com.csv"})
	require.NoError(t, err)
	srv := server(t, s, o)
	for _, path := range []string{"/", fmt.Sprintf("/lanes/transactional/mail/%d", id), "/suppressions"} {
		a := get(t, srv.URL+path)
		require.Equal(t, http.StatusOK, a.code, path)
		assert.NotContains(t, a.body, "zoe.secret", path)
		assert.Contains(t, a.body, "z***@example.com", path)
	}
	a := get(t, fmt.Sprintf("%s/lanes/transactional/mail/%d", srv.URL, id))
	assert.Contains(t, a.body, "queue: stored headers", "the headers' error is shown")
}

func TestReadOnly(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *sql.DB) {
		s := seed(t, db)
		srv := server(t, s, nil)
		for _, path := range append(pagesOf(s), "/nowhere", fmt.Sprintf("/lanes/transactional/mail/%d/retry", s.ids["bob"]), "/lanes/transactional/pause") {
			for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, "PROPFIND"} {
				a := do(t, method, srv.URL+path, url.Values{"csrf": {"x"}}, nil)
				assert.Equal(t, http.StatusMethodNotAllowed, a.code, "%s %s", method, path)
				assert.Equal(t, "GET, HEAD", a.head.Get("Allow"))
			}
		}
		a := do(t, http.MethodHead, srv.URL+"/", nil, nil)
		assert.Equal(t, http.StatusOK, a.code)
		row, err := s.q.Row(t.Context(), s.ids["bob"])
		require.NoError(t, err)
		assert.Equal(t, "failed", row.Status, "nothing changed")
	})
}

func TestCredentials(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *sql.DB) {
		s := seed(t, db)
		srv := server(t, s, &statuspage.Options{Credentials: statuspage.Credentials{Token: "s3cret-token", User: "ops", Password: "pa55"}})
		for name, c := range map[string]struct {
			edit func(*http.Request)
			code int
		}{
			"none":           {nil, http.StatusUnauthorized},
			"basic":          {func(r *http.Request) { r.SetBasicAuth("ops", "pa55") }, http.StatusOK},
			"wrong password": {func(r *http.Request) { r.SetBasicAuth("ops", "pa56") }, http.StatusUnauthorized},
			"wrong user":     {func(r *http.Request) { r.SetBasicAuth("root", "pa55") }, http.StatusUnauthorized},
			"bearer":         {func(r *http.Request) { r.Header.Set("Authorization", "Bearer s3cret-token") }, http.StatusOK},
			"bearer, lower":  {func(r *http.Request) { r.Header.Set("Authorization", "bearer s3cret-token") }, http.StatusOK},
			"wrong token":    {func(r *http.Request) { r.Header.Set("Authorization", "Bearer s3cret-tokem") }, http.StatusUnauthorized},
			"token as basic": {func(r *http.Request) { r.SetBasicAuth("ops", "s3cret-token") }, http.StatusUnauthorized},
		} {
			for _, path := range []string{"/", "/failures", "/style.css", "/nowhere", fmt.Sprintf("/lanes/transactional/mail/%d", s.ids["bob"])} {
				a := do(t, http.MethodGet, srv.URL+path, nil, c.edit)
				want := c.code
				if want == http.StatusOK && path == "/nowhere" {
					want = http.StatusNotFound
				}
				assert.Equal(t, want, a.code, "%s: %s", name, path)
				if a.code == http.StatusUnauthorized {
					assert.Equal(t, []string{`Basic realm="mailspool status", charset="UTF-8"`, `Bearer realm="mailspool status"`}, a.head.Values("WWW-Authenticate"))
					assert.NotContains(t, a.body, "example.com", "nothing of the queue without credentials")
				}
			}
			// Credentials before the method: a stranger learns nothing.
			a := do(t, http.MethodPost, srv.URL+"/", url.Values{}, c.edit)
			if c.code == http.StatusOK {
				assert.Equal(t, http.StatusMethodNotAllowed, a.code, name)
			} else {
				assert.Equal(t, http.StatusUnauthorized, a.code, name)
			}
		}

		_, err := statuspage.New([]*queue.Queue{s.q}, &statuspage.Options{Credentials: statuspage.Credentials{User: "ops"}})
		assert.ErrorContains(t, err, "need both a user and a password")
	})
}

func TestCheckListen(t *testing.T) {
	creds := statuspage.Credentials{Token: "t"}
	for _, c := range []struct {
		addr  string
		creds statuspage.Credentials
		err   string
	}{
		{"127.0.0.1:9465", statuspage.Credentials{}, ""},
		{"127.0.0.2:9465", statuspage.Credentials{}, ""},
		{"[::1]:9465", statuspage.Credentials{}, ""},
		{"localhost:9465", statuspage.Credentials{}, ""},
		{"0.0.0.0:9465", statuspage.Credentials{}, "0.0.0.0:9465 is not a loopback address: the status page needs credentials"},
		{":9465", statuspage.Credentials{}, "not a loopback address"},
		{"[::]:9465", statuspage.Credentials{}, "not a loopback address"},
		{"10.0.0.5:9465", statuspage.Credentials{}, "not a loopback address"},
		{"admin.internal:9465", statuspage.Credentials{}, "not a loopback address"},
		{"0.0.0.0:9465", creds, ""},
		{"0.0.0.0:9465", statuspage.Credentials{User: "ops", Password: "p"}, ""},
		{"0.0.0.0:9465", statuspage.Credentials{Password: "p"}, "need both a user and a password"},
		{"9465", creds, "is not host:port"},
	} {
		err := statuspage.CheckListen(c.addr, c.creds)
		if c.err == "" {
			assert.NoError(t, err, c.addr)
		} else {
			assert.ErrorContains(t, err, c.err, c.addr)
		}
	}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func TestActions(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *sql.DB) {
		s := seed(t, db)
		var logs bytes.Buffer
		srv := server(t, s, &statuspage.Options{Actions: true, Credentials: statuspage.Credentials{User: "alice", Password: "pw"},
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		alice := func(r *http.Request) { r.SetBasicAuth("alice", "pw") }
		bobPage := fmt.Sprintf("%s/lanes/transactional/mail/%d", srv.URL, s.ids["bob"])

		a := do(t, http.MethodGet, bobPage, nil, alice)
		require.Equal(t, http.StatusOK, a.code)
		m := csrfRE.FindStringSubmatch(a.body)
		require.NotNil(t, m, "the retry form carries a token")
		token := m[1]
		assert.Contains(t, a.body, `/mail/`+fmt.Sprint(s.ids["bob"])+`/retry"`)
		assert.NotContains(t, a.body, `/cancel"`, "a failed mail cannot be cancelled")

		status := func(who string) string {
			row, err := s.q.Row(t.Context(), s.ids[who])
			require.NoError(t, err)
			return row.Status
		}
		for name, c := range map[string]struct {
			form url.Values
			edit func(*http.Request)
		}{
			"no token":    {url.Values{}, alice},
			"wrong token": {url.Values{"csrf": {token + "x"}}, alice},
			"cross-site": {url.Values{"csrf": {token}}, func(r *http.Request) {
				alice(r)
				r.Header.Set("Sec-Fetch-Site", "cross-site")
			}},
			"other origin": {url.Values{"csrf": {token}}, func(r *http.Request) {
				alice(r)
				r.Header.Set("Origin", "https://evil.example")
			}},
		} {
			a := do(t, http.MethodPost, bobPage+"/retry", c.form, c.edit)
			assert.Equal(t, http.StatusForbidden, a.code, name)
			assert.Equal(t, "failed", status("bob"), name)
		}
		a = do(t, http.MethodPost, bobPage+"/retry", url.Values{"csrf": {token}}, nil)
		assert.Equal(t, http.StatusUnauthorized, a.code, "a token is no credential")
		assert.NotContains(t, logs.String(), "action=retry", "nothing refused before its checks is logged as an action")

		a = do(t, http.MethodPost, bobPage+"/retry", url.Values{"csrf": {token}}, alice)
		require.Equal(t, http.StatusSeeOther, a.code, a.body)
		assert.Equal(t, fmt.Sprintf("/lanes/transactional/mail/%d?done=retry", s.ids["bob"]), a.head.Get("Location"))
		assert.Equal(t, "pending", status("bob"))
		assert.Regexp(t, `level=INFO msg="status page action" action=retry lane=transactional by=alice remote=127.0.0.1:\d+ id=`+fmt.Sprint(s.ids["bob"]), logs.String())

		a = do(t, http.MethodPost, bobPage+"/retry", url.Values{"csrf": {token}}, alice)
		assert.Equal(t, http.StatusConflict, a.code, "pending now: retry does not apply")
		assert.Contains(t, a.body, "wrong state")
		assert.Contains(t, logs.String(), `msg="status page action refused" action=retry`)

		dora := fmt.Sprintf("%s/lanes/transactional/mail/%d", srv.URL, s.ids["dora"])
		a = do(t, http.MethodPost, dora+"/cancel", url.Values{"csrf": {token}}, alice)
		require.Equal(t, http.StatusSeeOther, a.code, a.body)
		assert.Equal(t, "failed", status("dora"))
		assert.Contains(t, logs.String(), "action=cancel lane=transactional by=alice")
		a = do(t, http.MethodPost, dora+"/explode", url.Values{"csrf": {token}}, alice)
		assert.Equal(t, http.StatusNotFound, a.code)
		a = do(t, http.MethodPost, srv.URL+"/lanes/transactional/mail/999/cancel", url.Values{"csrf": {token}}, alice)
		assert.Equal(t, http.StatusNotFound, a.code)

		a = do(t, http.MethodPost, srv.URL+"/lanes/transactional/pause", url.Values{"csrf": {token}}, alice)
		require.Equal(t, http.StatusSeeOther, a.code, a.body)
		assert.Equal(t, "/?done=pause", a.head.Get("Location"))
		a = do(t, http.MethodGet, srv.URL+"/", nil, alice)
		assert.Contains(t, a.body, "paused by an operator")
		assert.Contains(t, a.body, "paused on the status page by alice")
		a = do(t, http.MethodPost, srv.URL+"/lanes/transactional/resume", url.Values{"csrf": {token}}, alice)
		require.Equal(t, http.StatusSeeOther, a.code, a.body)
		a = do(t, http.MethodGet, srv.URL+"/", nil, alice)
		assert.Contains(t, a.body, "claiming")
		assert.Contains(t, logs.String(), "action=pause lane=transactional by=alice")
		assert.Contains(t, logs.String(), "action=resume lane=transactional by=alice")

		for _, method := range []string{http.MethodPut, http.MethodDelete, http.MethodPatch} {
			a = do(t, method, bobPage+"/retry", url.Values{"csrf": {token}}, alice)
			assert.Equal(t, http.StatusMethodNotAllowed, a.code, method)
		}
		a = do(t, http.MethodPost, srv.URL+"/", url.Values{"csrf": {token}}, alice)
		assert.Equal(t, http.StatusMethodNotAllowed, a.code, "POST only where a button posts")
	})
}

func TestFiguresCached(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *sql.DB) {
		s := seed(t, db)
		cached := server(t, s, &statuspage.Options{CacheFor: time.Hour})
		assert.Equal(t, "3", figures(get(t, cached.URL+"/").body)["backlog"])
		_, err := s.q.Cancel(t.Context(), s.ids["dora"])
		require.NoError(t, err)
		assert.Equal(t, "3", figures(get(t, cached.URL+"/").body)["backlog"], "read again only after CacheFor")
		fresh := server(t, s, &statuspage.Options{CacheFor: time.Nanosecond})
		assert.Equal(t, "2", figures(get(t, fresh.URL+"/").body)["backlog"])
	})
}

func TestMountedUnderAPrefix(t *testing.T) {
	s := seed(t, sqliteDB(t))
	p, err := statuspage.New([]*queue.Queue{s.q}, nil)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/ops/mail/", http.StripPrefix("/ops/mail", p))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	a := get(t, srv.URL+"/ops/mail/")
	require.Equal(t, http.StatusOK, a.code)
	assert.Contains(t, a.body, `href="/ops/mail/style.css"`)
	assert.Contains(t, a.body, `href="/ops/mail/lanes/transactional/failures?rule=smtp-5.1.1`)
	a = get(t, fmt.Sprintf("%s/ops/mail/mail?lane=transactional&id=%d", srv.URL, s.ids["bob"]))
	assert.Equal(t, fmt.Sprintf("/ops/mail/lanes/transactional/mail/%d", s.ids["bob"]), a.head.Get("Location"))
}

func TestNew(t *testing.T) {
	s := seed(t, sqliteDB(t))
	_, err := statuspage.New(nil, nil)
	assert.ErrorContains(t, err, "no lanes")
	_, err = statuspage.New([]*queue.Queue{s.q, s.q}, nil)
	assert.ErrorContains(t, err, "lane transactional given twice")
}

func TestUnreadableLane(t *testing.T) {
	db := sqliteDB(t)
	s := seed(t, db)
	missing, err := queue.New(t.Context(), db, queue.Lane{Name: "marketing", Table: "mail_never_migrated"}, nil)
	require.NoError(t, err)
	p, err := statuspage.New([]*queue.Queue{s.q, missing}, nil)
	require.NoError(t, err)
	srv := httptest.NewServer(p)
	defer srv.Close()
	a := get(t, srv.URL+"/")
	require.Equal(t, http.StatusOK, a.code, "one lane's failure does not take the page down")
	assert.Equal(t, "3", figures(a.body)["backlog"], "the other lane's figures")
	assert.Contains(t, a.body, `id="lane-marketing"`)
	assert.Contains(t, a.body, "reading these figures failed: queue: stats")
	a = get(t, srv.URL+"/failures")
	assert.Equal(t, http.StatusOK, a.code)
	assert.Contains(t, a.body, "queue: failures by rule")
	a = get(t, srv.URL+"/lanes/marketing/mail/1")
	assert.Equal(t, http.StatusInternalServerError, a.code)
	assert.Contains(t, a.body, "queue: reading mail 1")
}

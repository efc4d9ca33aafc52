package statuspage_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mailspool/mailspool/admin/statuspage"
	"github.com/mailspool/mailspool/inbound"
	"github.com/mailspool/mailspool/suppress"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// seedDeliverability adds, beside seed's mails, the suppression list and
// provider events the overview's sections read, and returns the options
// that show them:
//
//	suppressions in force for lane transactional: hard_bounce 2 (bob, fred),
//	complaint 1 (ann), unsubscribe 1 (scope transactional); one of another
//	lane's scope and one expired, which it does not count
//	events: a complaint about ann's mail (linked to the lane), then later
//	an unlinked delivery (the endpoint's last)
func seedDeliverability(t testing.TB, db *sql.DB, s seeded) *statuspage.Options {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, suppress.Migrate(ctx, db))
	require.NoError(t, inbound.Migrate(ctx, db))
	l, err := suppress.Open(db)
	require.NoError(t, err)
	now := time.Now()
	for _, e := range []suppress.Entry{
		{Address: "bob@example.com", Reason: suppress.HardBounce, Source: fmt.Sprintf("mail:transactional/%d", s.ids["bob"])},
		{Address: "fred@example.com", Reason: suppress.HardBounce},
		{Address: "ann@example.com", Reason: suppress.Complaint, Source: "sendgrid:ev-1"},
		{Address: "ivy@example.com", Scope: "transactional", Reason: suppress.Unsubscribe},
		{Address: "jay@example.com", Scope: "newsletter", Reason: suppress.Unsubscribe},
		{Address: "old@example.com", Reason: suppress.Manual, CreatedAt: now.Add(-48 * time.Hour), ExpiresAt: now.Add(-24 * time.Hour)},
	} {
		_, err := l.Add(ctx, e)
		require.NoError(t, err)
	}
	st, err := inbound.OpenStore(db)
	require.NoError(t, err)
	link := func(context.Context, []string) (map[string]inbound.Link, error) {
		return map[string]inbound.Link{"pid-ann": {Lane: "transactional", MailID: s.ids["ann"]}}, nil
	}
	_, err = st.RecordLinked(ctx, []inbound.Event{{Provider: inbound.SendGrid, EventID: "ev-1", Type: inbound.Complained, Recipient: "ann@example.com", ProviderMessageID: "pid-ann", Time: now}}, link)
	require.NoError(t, err)
	time.Sleep(2 * time.Millisecond) // received later, by the clock's millisecond
	_, err = st.RecordLinked(ctx, []inbound.Event{{Provider: inbound.SES, EventID: "ev-2", Type: inbound.Delivered, Recipient: "zed@example.org", ProviderMessageID: "pid-elsewhere", Time: now}}, link)
	require.NoError(t, err)
	return &statuspage.Options{Suppressions: l, Events: st}
}

func TestDeliverabilitySections(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *sql.DB) {
		s := seed(t, db)
		srv := server(t, s, seedDeliverability(t, db, s))
		a := get(t, srv.URL+"/")
		require.Equal(t, http.StatusOK, a.code, a.body)
		f := figures(a.body)
		assert.Equal(t, "2", f["suppressed-hard_bounce"])
		assert.Equal(t, "1", f["suppressed-complaint"])
		assert.Equal(t, "1", f["suppressed-unsubscribe"], "the lane's own scope, not another lane's")
		assert.NotContains(t, f, "suppressed-manual", "an expired entry is not in force")
		assert.Equal(t, "4", f["suppressed-total"])
		assert.Equal(t, "complained from sendgrid about", f["last-event"])
		assert.Regexp(t, fmt.Sprintf(`href="/lanes/transactional/mail/%d">mail %d</a> \(a\*\*\*@example.com\), received \d+s ago`, s.ids["ann"], s.ids["ann"]), a.body)
		assert.Regexp(t, `^the webhook endpoint's last: delivered from ses, received \d+s ago$`, f["last-event-any"])
		assert.NotContains(t, a.body, "ann@example.com", "masked")
		assert.Contains(t, a.body, `<a href="/suppressions">suppressions</a>`, "the header links the list")

		// Without the options, neither section nor the page.
		plain := server(t, s, nil)
		a = get(t, plain.URL+"/")
		assert.NotContains(t, a.body, "suppressed-total")
		assert.NotContains(t, a.body, "last provider event")
		assert.Equal(t, http.StatusNotFound, get(t, plain.URL+"/suppressions").code)
	})
}

var addressCell = regexp.MustCompile(`<td data-field="address">([^<]*)</td>`)

// cells returns the address cells of a suppression list page, in order.
func cells(body string) []string {
	var out []string
	for _, m := range addressCell.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestSuppressionsPage(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *sql.DB) {
		s := seed(t, db)
		o := seedDeliverability(t, db, s)
		srv := server(t, s, o)

		a := get(t, srv.URL+"/suppressions")
		require.Equal(t, http.StatusOK, a.code, a.body)
		assert.ElementsMatch(t, []string{"b***@example.com", "f***@example.com", "a***@example.com", "i***@example.com", "j***@example.com"}, cells(a.body))
		assert.NotContains(t, a.body, "bob@example.com", "masked")
		assert.NotContains(t, a.body, "older entries")

		a = get(t, srv.URL+"/suppressions?reason=hard_bounce")
		require.Equal(t, http.StatusOK, a.code, a.body)
		assert.ElementsMatch(t, []string{"b***@example.com", "f***@example.com"}, cells(a.body))
		a = get(t, srv.URL+"/suppressions?scope=newsletter")
		assert.Equal(t, []string{"j***@example.com"}, cells(a.body))
		a = get(t, srv.URL+"/suppressions?address=Bob@Example.com")
		assert.Equal(t, []string{"b***@example.com"}, cells(a.body))

		for _, bad := range []string{"reason=soft_bounce", "scope=Not+A+Lane", "address=not-an-address", "before=yesterday", "before=1&skip=-1"} {
			a = get(t, srv.URL+"/suppressions?"+bad)
			assert.Equal(t, http.StatusBadRequest, a.code, bad)
		}
		assert.Equal(t, http.StatusMethodNotAllowed, do(t, http.MethodPost, srv.URL+"/suppressions", nil, nil).code)

		// 250 entries made in one millisecond (an import) and pages of
		// 100: every entry once, none skipped, no address in a link
		// (addresses in full here, to tell them apart).
		full := *o
		full.ShowAddresses = true
		srv = server(t, s, &full)
		var es []suppress.Entry
		at := time.Now().Add(time.Hour)
		for i := range 250 {
			es = append(es, suppress.Entry{Address: fmt.Sprintf("imp%03d@example.net", i), Reason: suppress.Manual, CreatedAt: at})
		}
		require.NoError(t, o.Suppressions.AddAll(context.Background(), es))
		seen := map[string]int{}
		next, pages := "/suppressions?reason=manual", 0
		for next != "" && pages < 10 {
			a = get(t, srv.URL+next)
			require.Equal(t, http.StatusOK, a.code, a.body)
			pages++
			for _, c := range cells(a.body) {
				seen[c]++
			}
			next = ""
			if m := regexp.MustCompile(`<a class="older" href="([^"]+)"`).FindStringSubmatch(a.body); m != nil {
				next = regexp.MustCompile(`&amp;`).ReplaceAllString(m[1], "&")
				assert.NotContains(t, next, "example.net")
			}
		}
		assert.Equal(t, 3, pages)
		assert.Len(t, seen, 250, "none skipped")
		for a, n := range seen {
			assert.Equal(t, 1, n, "%s shown once", a)
		}
	})
}

// The links that carry a value (a rule, a kind, the suppression list's
// filters) escape it once: html/template escapes a URL's query, so a value
// escaped before it came out twice (j%2540x.com) and the link found nothing.
func TestLinksEscapeValuesOnce(t *testing.T) {
	db := sqliteDB(t)
	s := seed(t, db)
	o := seedDeliverability(t, db, s)
	srv := server(t, s, o)
	href := regexp.MustCompile(`href="([^"]*)"`)
	follow := func(h string) answer {
		return get(t, srv.URL+strings.ReplaceAll(h, "&amp;", "&"))
	}

	// A rule whose name a URL escapes.
	_, err := db.Exec(`UPDATE mail_queue SET last_rule = ? WHERE id = ?`, "ses:Bounce/General", s.ids["fred"])
	require.NoError(t, err)
	for _, page := range []string{"/", "/failures"} {
		a := get(t, srv.URL+page)
		require.Equal(t, http.StatusOK, a.code)
		var link string
		for _, m := range href.FindAllStringSubmatch(a.body, -1) {
			if strings.Contains(m[1], "rule=ses") {
				link = m[1]
			}
		}
		require.NotEmpty(t, link, page)
		assert.Equal(t, "/lanes/transactional/failures?rule=ses%3aBounce%2fGeneral&amp;kind=permanent", link, page)
		f := follow(link)
		require.Equal(t, http.StatusOK, f.code)
		assert.Contains(t, f.body, fmt.Sprintf(`/mail/%d"`, s.ids["fred"]), "%s: the link finds the mail", page)
	}

	// The older entries of the list filtered by an address.
	var es []suppress.Entry
	at := time.Now().Add(time.Hour)
	for i := range 101 {
		es = append(es, suppress.Entry{Address: "zoe@example.com", Scope: fmt.Sprintf("lane%03d", i), Reason: suppress.Manual, CreatedAt: at.Add(time.Duration(i) * time.Millisecond)})
	}
	require.NoError(t, o.Suppressions.AddAll(context.Background(), es))
	a := get(t, srv.URL+"/suppressions?address=zoe%40example.com")
	require.Equal(t, http.StatusOK, a.code, a.body)
	m := regexp.MustCompile(`<a class="older" href="([^"]+)"`).FindStringSubmatch(a.body)
	require.NotNil(t, m)
	assert.Contains(t, m[1], "address=zoe%40example.com")
	a = follow(m[1])
	require.Equal(t, http.StatusOK, a.code, a.body)
	assert.Equal(t, []string{"z***@example.com"}, cells(a.body), "the 101st")
}

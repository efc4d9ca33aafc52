package unsubscribe

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/queue/dburl/dburltest"
	"github.com/mailspool/mailspool/suppress"
	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"
)

var links = Links{URL: "https://mail.example.com/u/", Mailto: "unsubscribe@example.com"}

func secret(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func signer(t *testing.T) *Signer {
	t.Helper()
	s, err := NewSigner([]Key{{ID: "k1", Secret: secret(1)}})
	require.NoError(t, err)
	return s
}

type fixture struct {
	db    struct{ DB *sql.DB }
	list  *suppress.List
	s     *Signer
	bulk  *queue.Queue // lane "news", bulk
	trans *queue.Queue // lane "resets", transactional
	srv   *httptest.Server
}

func open(t *testing.T, u string) *fixture {
	t.Helper()
	ctx := context.Background()
	db, err := dburl.Open(u)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	require.NoError(t, queue.Migrate(ctx, db, "news_queue", "resets_queue"))
	require.NoError(t, suppress.Migrate(ctx, db))
	list, err := suppress.Open(db)
	require.NoError(t, err)
	f := &fixture{list: list, s: signer(t)}
	screen, err := Lane(list, "news", suppress.Policy{}, f.s, links, "news", "resets")
	require.NoError(t, err)
	f.bulk, err = queue.New(ctx, db, queue.Lane{Name: "news", Table: "news_queue", Screen: screen}, nil)
	require.NoError(t, err)
	f.trans, err = queue.New(ctx, db, queue.Lane{Name: "resets", Table: "resets_queue", Screen: list.Screen("resets", suppress.Policy{})}, nil)
	require.NoError(t, err)
	f.srv = httptest.NewServer(NewHandler(f.s, list, nil))
	t.Cleanup(f.srv.Close)
	f.db.DB = db
	return f
}

func sqlite(t *testing.T) *fixture {
	return open(t, "sqlite:"+filepath.Join(t.TempDir(), "q.db"))
}

func mailTo(addr string) *transport.Message {
	return &transport.Message{From: mail.Address{Address: "news@shop.example"}, To: mail.Address{Address: addr}, Subject: "news", Text: "hi"}
}

func header(m transport.Message, name string) string {
	for _, h := range m.Headers {
		if strings.EqualFold(h.Name, name) {
			return h.Value
		}
	}
	return ""
}

// enqueueLink queues a mail to addr in the bulk lane (list "" = the
// lane's) and returns the https link of its List-Unsubscribe header.
func (f *fixture) enqueueLink(t *testing.T, addr, list string) string {
	t.Helper()
	var opts []queue.Option
	if list != "" {
		opts = append(opts, queue.List(list))
	}
	id, err := f.bulk.Enqueue(context.Background(), f.db.DB, mailTo(addr), opts...)
	require.NoError(t, err)
	m, err := f.bulk.Message(context.Background(), id)
	require.NoError(t, err)
	v := header(*m, HeaderUnsubscribe)
	require.True(t, strings.HasPrefix(v, "<https://mail.example.com/u/"), v)
	link, _, _ := strings.Cut(strings.TrimPrefix(v, "<"), ">")
	return link
}

// local turns a public link into the test server's.
func (f *fixture) local(link string) string {
	return f.srv.URL + strings.TrimPrefix(link, "https://mail.example.com")
}

func (f *fixture) entries(t *testing.T) []suppress.Entry {
	t.Helper()
	es, err := f.list.Entries(context.Background(), suppress.Filter{})
	require.NoError(t, err)
	return es
}

func postForm(t *testing.T, u string) *http.Response {
	t.Helper()
	resp, err := noRedirect.PostForm(u, url.Values{"List-Unsubscribe": {"One-Click"}})
	require.NoError(t, err)
	resp.Body.Close()
	return resp
}

func postMultipart(t *testing.T, u string) *http.Response {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	require.NoError(t, mw.WriteField("List-Unsubscribe", "One-Click"))
	require.NoError(t, mw.Close())
	resp, err := noRedirect.Post(u, mw.FormDataContentType(), &b)
	require.NoError(t, err)
	resp.Body.Close()
	return resp
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func TestBulkHeadersAndTransactionalNone(t *testing.T) {
	f := sqlite(t)
	ctx := context.Background()
	id, err := f.bulk.Enqueue(ctx, f.db.DB, mailTo("ann@example.com"), queue.List("digest"))
	require.NoError(t, err)
	m, err := f.bulk.Message(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "List-Unsubscribe=One-Click", header(*m, HeaderUnsubscribePost))
	assert.Equal(t, "<digest.shop.example>", header(*m, HeaderListID))
	assert.Contains(t, header(*m, HeaderUnsubscribe), ", <mailto:unsubscribe@example.com?subject=unsubscribe%20")
	assert.Equal(t, "digest", f.s.ListOf(m))
	c, ok := f.s.Verify(strings.TrimPrefix(strings.Split(header(*m, HeaderUnsubscribe), ">")[0], "<https://mail.example.com/u/"))
	require.True(t, ok)
	assert.Equal(t, Claim{KeyID: "k1", List: "digest", MailID: m.MessageID, Recipient: "ann@example.com"}, c)

	id, err = f.trans.Enqueue(ctx, f.db.DB, mailTo("ann@example.com"))
	require.NoError(t, err)
	m, err = f.trans.Message(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, m.Headers, "a transactional lane's mail gets no unsubscribe headers")
	_, err = f.trans.Enqueue(ctx, f.db.DB, mailTo("ann@example.com"), queue.List("digest"))
	require.ErrorIs(t, err, queue.ErrInvalid, "a list on a lane without lists is refused")

	// A list named after another lane, or "all", would make its
	// unsubscribes block that lane's (or every lane's) mail.
	for _, name := range []string{"resets", "all"} {
		_, err = f.bulk.Enqueue(ctx, f.db.DB, mailTo("ann@example.com"), queue.List(name))
		require.ErrorIs(t, err, queue.ErrInvalid, "list %q", name)
		assert.Contains(t, err.Error(), "list "+name+" is ")
	}
	_, err = f.bulk.Enqueue(ctx, f.db.DB, mailTo("ann@example.com"), queue.List("news"))
	require.NoError(t, err, "the lane's own list may be named")

	m = mailTo("bob@example.com")
	m.Headers = []transport.Header{{Name: "list-unsubscribe", Value: "<https://evil.example/x>"}}
	_, err = f.bulk.Enqueue(ctx, f.db.DB, m)
	require.ErrorIs(t, err, queue.ErrInvalid, "a bulk lane sets List-Unsubscribe itself")
}

var scannerAgents = []string{
	"Mozilla/5.0 (compatible; Barracuda Sentinel)",
	"Microsoft Office/16.0 (Windows NT 10.0; Microsoft Outlook 16.0; Pro) SafeLinks",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36 Proofpoint",
	"Mimecast URL Protect",
	"GoogleImageProxy",
	"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
	"curl/8.5.0",
	"",
}

func TestScannersChangeNothing(t *testing.T) {
	f := sqlite(t)
	link := f.local(f.enqueueLink(t, "ann@example.com", ""))
	n := 1000
	if testing.Short() {
		n = 100
	}
	for i := range n {
		method := http.MethodGet
		if i%2 == 1 {
			method = http.MethodHead
		}
		req, err := http.NewRequest(method, link, nil)
		require.NoError(t, err)
		req.Header.Set("User-Agent", scannerAgents[i%len(scannerAgents)])
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Empty(t, resp.Header.Values("Set-Cookie"))
		if method == http.MethodGet {
			require.Contains(t, string(body), `<form method="post">`)
			require.Contains(t, string(body), `name="List-Unsubscribe" value="One-Click"`)
		}
	}
	assert.Empty(t, f.entries(t), "GET and HEAD never change state")
	_, err := f.bulk.Enqueue(context.Background(), f.db.DB, mailTo("ann@example.com"))
	require.NoError(t, err, "the recipient still receives the list")
}

func TestOneClickBothEncodings(t *testing.T) {
	for _, enc := range []struct {
		name string
		post func(*testing.T, string) *http.Response
	}{{"urlencoded", postForm}, {"multipart", postMultipart}} {
		t.Run(enc.name, func(t *testing.T) {
			f := sqlite(t)
			ctx := context.Background()
			before, err := f.bulk.Enqueue(ctx, f.db.DB, mailTo("ann@example.com"), queue.List("weekly"))
			require.NoError(t, err)
			link := f.local(f.enqueueLink(t, "Ann@Example.com", "weekly"))
			for range 2 { // idempotent
				resp := enc.post(t, link)
				require.Equal(t, http.StatusOK, resp.StatusCode)
				assert.Empty(t, resp.Header.Get("Location"))
				assert.Empty(t, resp.Header.Values("Set-Cookie"))
			}
			es := f.entries(t)
			require.Len(t, es, 1)
			assert.Equal(t, "ann@example.com", es[0].Address)
			assert.Equal(t, "weekly", es[0].Scope)
			assert.Equal(t, suppress.Unsubscribe, es[0].Reason)
			assert.True(t, strings.HasPrefix(es[0].Source, "unsubscribe:"), es[0].Source)

			// The next enqueue for that recipient and list is refused.
			_, err = f.bulk.Enqueue(ctx, f.db.DB, mailTo("ann@example.com"), queue.List("weekly"))
			require.ErrorIs(t, err, queue.ErrSuppressed)
			// Another list, the lane's own and the transactional lane are
			// not blocked.
			_, err = f.bulk.Enqueue(ctx, f.db.DB, mailTo("ann@example.com"))
			require.NoError(t, err)
			other, err := f.bulk.Enqueue(ctx, f.db.DB, mailTo("ann@example.com"), queue.List("digest"))
			require.NoError(t, err)
			reset, err := f.trans.Enqueue(ctx, f.db.DB, mailTo("ann@example.com"))
			require.NoError(t, err)
			// The mail queued before the click is stopped at its claim;
			// the other list's is sent.
			tr := &counting{}
			drain(t, f.bulk, tr, before, other)
			r, err := f.bulk.Row(ctx, before)
			require.NoError(t, err)
			assert.Equal(t, "failed", r.Status)
			r, err = f.bulk.Row(ctx, other)
			require.NoError(t, err)
			assert.Equal(t, "sent", r.Status)
			drain(t, f.trans, tr, reset)
			r, err = f.trans.Row(ctx, reset)
			require.NoError(t, err)
			assert.Equal(t, "sent", r.Status, "a list unsubscribe never blocks transactional mail")
		})
	}
}

func TestBadPosts(t *testing.T) {
	f := sqlite(t)
	link := f.local(f.enqueueLink(t, "ann@example.com", ""))
	resp, err := noRedirect.PostForm(link, url.Values{"List-Unsubscribe": {"Yes"}})
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp, err = noRedirect.Post(link, "application/json", strings.NewReader(`{"List-Unsubscribe":"One-Click"}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	req, _ := http.NewRequest(http.MethodDelete, link, nil)
	resp, err = noRedirect.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Empty(t, f.entries(t))
}

// flipped returns tok with bit i of its decoded bytes flipped, encoded
// again: of the payload and then the MAC for a token of the first form,
// of the sealed part for a sealed one.
func flipped(tok string, i int) string {
	if id, blob, ok := strings.Cut(tok, sealSep); ok {
		b, _ := b64.DecodeString(blob)
		b[i/8] ^= 1 << (i % 8)
		return id + sealSep + b64.EncodeToString(b)
	}
	p, s, _ := strings.Cut(tok, ".")
	pb, _ := b64.DecodeString(p)
	sb, _ := b64.DecodeString(s)
	all := append(append([]byte{}, pb...), sb...)
	all[i/8] ^= 1 << (i % 8)
	return b64.EncodeToString(all[:len(pb)]) + "." + b64.EncodeToString(all[len(pb):])
}

// firstForm makes a token of the first form (the claim in clear, and its
// HMAC), as mail sent before sealed tokens carries.
func firstForm(k Key, c Claim) string {
	payload := k.ID + "\n" + c.List + "\n" + c.MailID + "\n" + c.Recipient
	return b64.EncodeToString([]byte(payload)) + "." + b64.EncodeToString(mac(k.Secret, payload))
}

func TestOneBitFlippedIs404(t *testing.T) {
	f := sqlite(t)
	link := f.enqueueLink(t, "ann@example.com", "")
	tok := strings.TrimPrefix(link, links.URL)
	_, ok := f.s.Verify(tok)
	require.True(t, ok)
	id, blob, ok := strings.Cut(tok, sealSep)
	require.True(t, ok, "a sealed token: %s", tok)
	n := 8 * len(mustDecode(blob))
	for i := range n {
		_, ok := f.s.Verify(flipped(tok, i))
		require.False(t, ok, "bit %d flipped still verifies", i)
	}
	for _, i := range []int{0, 8 * 12, n - 1} { // nonce, sealed claim, tag
		bad := f.local(links.URL + flipped(tok, i))
		for _, post := range []func(*testing.T, string) *http.Response{postForm, postMultipart} {
			assert.Equal(t, http.StatusNotFound, post(t, bad).StatusCode)
		}
		resp, err := http.Get(bad)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	}
	for _, junk := range []string{"", "x", "...", "~", id + sealSep, sealSep + blob, "k2" + sealSep + blob, id + "x" + sealSep + blob, tok[:len(tok)-1], strings.Repeat("A", 300), blob} {
		_, ok := f.s.Verify(junk)
		assert.False(t, ok, "%q", junk)
	}

	// A token of the first form: every flipped bit is refused too.
	old := firstForm(Key{ID: "k1", Secret: secret(1)}, Claim{List: "news", MailID: "m1@shop.example", Recipient: "ann@example.com"})
	_, ok = f.s.Verify(old)
	require.True(t, ok)
	p, sig, _ := strings.Cut(old, ".")
	for i := range 8 * (len(mustDecode(p)) + len(mustDecode(sig))) {
		_, ok := f.s.Verify(flipped(old, i))
		require.False(t, ok, "bit %d of a first-form token flipped still verifies", i)
	}
	assert.Empty(t, f.entries(t))
}

// TestTokenNamesNoRecipient: a link says nothing of whom it was sent to,
// or of the list, to whoever reads it (an access log, a link scanner); two
// tokens of the same claim differ; the list is read back for the claim.
func TestTokenNamesNoRecipient(t *testing.T) {
	s := signer(t)
	c := Claim{List: "weekly-digest", MailID: "20261206.abc@shop.example", Recipient: "ann.example.person@example.com"}
	t1, err := s.Token(c)
	require.NoError(t, err)
	t2, err := s.Token(c)
	require.NoError(t, err)
	assert.NotEqual(t, t1, t2, "a random nonce per token")
	for _, tok := range []string{t1, t2} {
		_, blob, _ := strings.Cut(tok, sealSep)
		raw := string(mustDecode(blob))
		for _, secret := range []string{c.Recipient, "ann.example", c.List, c.MailID} {
			assert.NotContains(t, tok, secret)
			assert.NotContains(t, raw, secret)
			assert.NotContains(t, tok, b64.EncodeToString([]byte(secret))[:8])
		}
		got, ok := s.Verify(tok)
		require.True(t, ok)
		assert.Equal(t, Claim{KeyID: "k1", List: c.List, MailID: c.MailID, Recipient: c.Recipient}, got)
	}
	m := &transport.Message{Headers: []transport.Header{{Name: HeaderUnsubscribe, Value: "<" + links.URL + t1 + ">"}}}
	assert.Equal(t, "weekly-digest", s.ListOf(m))
	m.Headers[0].Value = "<" + links.URL + firstForm(Key{ID: "k1", Secret: secret(1)}, c) + ">"
	assert.Equal(t, "weekly-digest", s.ListOf(m), "a mail queued with a token of the first form")
}

func TestRotation(t *testing.T) {
	old := signer(t)
	tok, err := old.Token(Claim{List: "news", MailID: "m1@shop.example", Recipient: "ann@example.com"})
	require.NoError(t, err)
	now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	rotated, err := NewSigner([]Key{{ID: "k2", Secret: secret(2)}, {ID: "k1", Secret: secret(1), Until: now.Add(30 * 24 * time.Hour)}})
	require.NoError(t, err)
	rotated.SetClock(func() time.Time { return now })
	c, ok := rotated.Verify(tok)
	require.True(t, ok, "a rotated-out key verifies during its grace")
	assert.Equal(t, "k1", c.KeyID)
	fresh, err := rotated.Token(Claim{List: "news", MailID: "m2@shop.example", Recipient: "ann@example.com"})
	require.NoError(t, err)
	c, ok = rotated.Verify(fresh)
	require.True(t, ok)
	assert.Equal(t, "k2", c.KeyID, "the newest key signs")
	_, ok = old.Verify(fresh)
	assert.False(t, ok)

	old1 := firstForm(Key{ID: "k1", Secret: secret(1)}, Claim{List: "news", MailID: "m0@shop.example", Recipient: "ann@example.com"})
	_, ok = rotated.Verify(old1)
	assert.True(t, ok, "a token of the first form verifies during its key's grace")

	rotated.SetClock(func() time.Time { return now.Add(31 * 24 * time.Hour) })
	_, ok = rotated.Verify(tok)
	assert.False(t, ok, "past its grace the old key verifies nothing")
	_, ok = rotated.Verify(old1)
	assert.False(t, ok, "past its grace the old key verifies nothing of the first form either")
	// A mail queued under the old key is still its list's at the claim.
	m := &transport.Message{Headers: []transport.Header{{Name: HeaderUnsubscribe, Value: "<" + links.URL + tok + ">"}}}
	assert.Equal(t, "news", rotated.ListOf(m))
	_, ok = rotated.Verify(fresh)
	assert.True(t, ok)

	// Through the handler: a link signed by the retired key works.
	db, err := dburl.Open("sqlite:" + filepath.Join(t.TempDir(), "q.db"))
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, suppress.Migrate(context.Background(), db))
	list, err := suppress.Open(db)
	require.NoError(t, err)
	rotated.SetClock(func() time.Time { return now })
	srv := httptest.NewServer(NewHandler(rotated, list, nil))
	defer srv.Close()
	assert.Equal(t, http.StatusOK, postForm(t, srv.URL+Prefix+tok).StatusCode)
	es, err := list.Entries(context.Background(), suppress.Filter{})
	require.NoError(t, err)
	require.Len(t, es, 1)
}

func TestSignerAndLinksRefuseBadInput(t *testing.T) {
	for _, keys := range [][]Key{
		nil,
		{{ID: "k1", Secret: []byte("short")}},
		{{ID: "K1!", Secret: secret(1)}},
		{{ID: "k1", Secret: secret(1), Until: time.Now()}},
		{{ID: "k1", Secret: secret(1)}, {ID: "k0", Secret: secret(2)}},
		{{ID: "k1", Secret: secret(1)}, {ID: "k1", Secret: secret(2), Until: time.Now()}},
	} {
		_, err := NewSigner(keys)
		assert.Error(t, err, "%v", keys)
	}
	for _, l := range []Links{{}, {URL: "http://mail.example.com/u/"}, {URL: "https://mail.example.com/x/"}, {URL: "https://mail.example.com/u/", Mailto: "not an address"}} {
		assert.Error(t, l.Check(), "%+v", l)
	}
	_, err := NewSigner([]Key{{ID: "k1", Secret: []byte("this secret must not be printed")}})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "must not be printed")
}

// TestListScopeOnEveryStore: the list's scope is checked at enqueue on
// MariaDB and PostgreSQL too (LookupScopes' statement).
func TestListScopeOnEveryStore(t *testing.T) {
	for name, u := range map[string]func(testing.TB) string{"mariadb": dburltest.MariaDB.Fresh, "postgres": dburltest.Postgres.Fresh} {
		t.Run(name, func(t *testing.T) {
			f := open(t, u(t))
			ctx := context.Background()
			_, err := f.list.Add(ctx, suppress.Entry{Address: "ann@example.com", Scope: "digest", Reason: suppress.Unsubscribe})
			require.NoError(t, err)
			_, err = f.bulk.Enqueue(ctx, f.db.DB, mailTo("ann@example.com"), queue.List("digest"))
			require.ErrorIs(t, err, queue.ErrSuppressed)
			_, err = f.bulk.Enqueue(ctx, f.db.DB, mailTo("ann@example.com"), queue.List("news"))
			require.NoError(t, err)
			_, err = f.trans.Enqueue(ctx, f.db.DB, mailTo("ann@example.com"))
			require.NoError(t, err)
		})
	}
}

type counting struct{}

func (counting) Send(_ context.Context, m *transport.Message) (transport.Receipt, error) {
	return transport.Receipt{MessageID: fmt.Sprint("p-", m.MessageID)}, nil
}
func (counting) Close() error { return nil }

// drain runs a worker on q until every id has left pending, retry and
// sending (waiting on progress, not a clock).
func drain(t *testing.T, q *queue.Queue, tr transport.Transport, ids ...int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := queue.NewWorker(q, tr, &queue.WorkerOptions{PollInterval: 20 * time.Millisecond, CleanupInterval: -1})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	for _, id := range ids {
		for {
			r, err := q.Row(context.Background(), id)
			require.NoError(t, err)
			if r.Status == "sent" || r.Status == "failed" {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	cancel()
	require.NoError(t, <-done)
}

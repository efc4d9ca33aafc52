package statuspage_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chromium returns the path of Debian's chromium. Under CI=true a missing
// browser fails the test (.ci/run installs it); elsewhere the test skips,
// saying how to install it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is required under CI=true and is not on PATH (.ci/run installs it: apt-get install -y chromium)")
	}
	t.Skip("chromium is not installed; install it with: apt-get update && apt-get install -y chromium")
	return ""
}

// artifacts is where the test's screenshots go: $MAILSPOOL_ARTIFACTS if
// set, else the test's temporary directory.
func artifacts(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("MAILSPOOL_ARTIFACTS"); d != "" {
		require.NoError(t, os.MkdirAll(d, 0o755))
		return d
	}
	return t.TempDir()
}

// browser starts headless chromium; the context ends it.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromium(t)
	// A guard against a wedged browser, not a budget: the steps take a
	// second or two.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	t.Cleanup(cancel)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.WindowSize(1100, 820),
	)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	return bctx
}

func screenshot(t *testing.T, dir, name string, png []byte) {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot: %s (%d KB)", path, len(png)/1024)
}

// TestBrowser drives headless chromium through the page of a seeded queue:
// the overview's figures, a click through the failures of a rule to a mail,
// its bodies collapsed until clicked, and a retry button that works in a
// real browser (its CSRF token and same-origin headers).
func TestBrowser(t *testing.T) {
	ctx := browser(t)
	db := sqliteDB(t)
	s := seed(t, db)
	o := seedDeliverability(t, db, s)
	o.Actions = true
	srv := server(t, s, o)
	dir := artifacts(t)
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err, sel)
		return v
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		require.NoError(t, err)
		screenshot(t, dir, name, png)
	}

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/")))
	lane := `#lane-transactional `
	assert.Equal(t, "3", text(lane+`[data-figure="backlog"]`))
	assert.Equal(t, "2", text(lane+`[data-figure="sent-last-hour"]`))
	assert.Equal(t, "2", text(lane+`[data-figure="failed-last-hour"]`))
	assert.Equal(t, "50.0 %", text(lane+`[data-figure="failure-rate"]`))
	assert.Equal(t, "1", text(lane+`[data-figure="sending"]`))
	assert.Contains(t, text(lane+`[data-figure="state"]`), "claiming")
	assert.Equal(t, "2", text(lane+`[data-figure="suppressed-hard_bounce"]`))
	assert.Equal(t, "4", text(lane+`[data-figure="suppressed-total"]`))
	assert.Regexp(t, `^complained from sendgrid about mail \d+ \(a\*\*\*@example.com\), received \d+s ago$`, text(lane+`[data-figure="last-event"]`))
	assert.Contains(t, text(lane+`[data-figure="last-event-any"]`), "delivered from ses")
	shot("statuspage-overview.png")

	// The suppression list, from its reason on the overview: masked.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(lane+`a[href$="suppressions?reason=hard_bounce"]`)),
		chromedp.WaitVisible(chromedp.CSS(`table.suppressions`)),
	))
	assert.Equal(t, "hard_bounce", text(`table.suppressions tbody tr:first-child td[data-field="reason"]`))
	cellsText := text(`table.suppressions tbody`)
	assert.Contains(t, cellsText, "b***@example.com")
	assert.NotContains(t, cellsText, "bob@example.com")
	assert.NotContains(t, cellsText, "complaint", "filtered by reason")
	shot("statuspage-suppressions.png")
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/")))

	bob := fmt.Sprint(s.ids["bob"])
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(lane+`a[href*="failures?rule=smtp-5.1.1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`table.mails`)),
		chromedp.Click(chromedp.CSS(`table.mails a[href$="/mail/`+bob+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`td[data-field="to"]`)),
	))
	url, err := chromedp.Run(ctx, chromedp.Location())
	require.NoError(t, err)
	assert.Equal(t, srv.URL+"/lanes/transactional/mail/"+bob, url)
	assert.Equal(t, "b***@example.com", text(`td[data-field="to"]`))
	assert.Equal(t, "permanent 550: 550 5.1.1 <b***@example.com>: Recipient address rejected: no such user", text(`td[data-field="last-outcome"]`))
	open := func() bool {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.JavascriptAttribute[bool](chromedp.CSS(`details`), "open"))
		require.NoError(t, err)
		return v
	}
	assert.False(t, open(), "the bodies start collapsed")
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`details summary`))))
	assert.True(t, open(), "a click opens them")
	shot("statuspage-mail.png")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`form[action$="/retry"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`p.done`)),
	))
	assert.Equal(t, "Done: retry.", text(`p.done`))
	assert.Contains(t, text(`td[data-field="status"]`), "pending")
	row, err := s.q.Row(t.Context(), s.ids["bob"])
	require.NoError(t, err)
	assert.Equal(t, "pending", row.Status)
}

// TestBrowserWithoutJavaScript clicks through the page with the page's
// scripts switched off: the overview, a rule's failures, a mail, its
// collapsed body, and the look-up form.
func TestBrowserWithoutJavaScript(t *testing.T) {
	ctx := browser(t)
	s := seed(t, sqliteDB(t))
	srv := server(t, s, nil)
	noScript := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	})
	bob := fmt.Sprint(s.ids["bob"])
	require.NoError(t, chromedp.Do(ctx,
		noScript,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.Click(chromedp.CSS(`#lane-transactional a[href*="failures?rule=smtp-5.1.1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`table.mails`)),
		chromedp.Click(chromedp.CSS(`table.mails a[href$="/mail/`+bob+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`td[data-field="to"]`)),
	))
	attrs := func() map[string]string {
		t.Helper()
		a, err := chromedp.Run(ctx, chromedp.Attributes(chromedp.CSS(`details`)))
		require.NoError(t, err)
		return a
	}
	assert.NotContains(t, attrs(), "open", "collapsed")
	// The click is not followed by a look at chromedp's copy of the page's
	// nodes (Attributes): the browser's attribute event updates it on
	// another goroutine after the click has returned, late on a busy
	// machine. The page itself is asked: its body shows, opened.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`details summary`)),
		chromedp.WaitVisible(chromedp.CSS(`details[open] > pre`)),
	), "opened by a click, no script needed")

	// And the page's scripts really were off: a page that sets its title
	// from a script keeps its own.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(`data:text/html,<title>static</title><script>document.title="scripted"</script>`)))
	title, err := chromedp.Run(ctx, chromedp.Title())
	require.NoError(t, err)
	assert.Equal(t, "static", title)
}

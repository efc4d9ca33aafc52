package alert

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A webhook whose error answer echoes the request (and so the token in its
// URL) is logged redacted and bounded; a redirect is not followed.
func TestWebhookAnswerIsRedactedAndRedirectsAreNotFollowed(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *sql.DB) {
		var elsewhere atomic.Int32
		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			elsewhere.Add(1)
		}))
		defer other.Close()
		echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.URL.Path, "moved") {
				http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
				return
			}
			body, _ := io.ReadAll(r.Body)
			w.WriteHeader(http.StatusInternalServerError)
			// The request line, escaped and raw, then a terminal escape,
			// then more than the snippet bound.
			io.WriteString(w, "bad request: "+r.Method+" "+r.URL.RequestURI()+" path="+r.URL.Path+" \x1b]52;c;aGk=\x07 "+string(body)+strings.Repeat("z", 1000))
		}))
		defer echo.Close()

		for _, path := range []string{"/services/T0K3N/S3CR3TPART?token=Q%2FUERY", "/moved/T0K3N/S3CR3TPART?token=Q%2FUERY"} {
			var logs lockedLog
			q := newQueue(t, db)
			a := newAlerter(t, db, q, Thresholds{}, Options{
				WebhookURL: echo.URL + path, Worker: "w1",
				Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			})
			require.NoError(t, q.Pause(context.Background(), ""))
			err := a.Check(context.Background())
			require.Error(t, err, path)
			msg := err.Error() + logs.String()
			for _, secret := range []string{"T0K3N", "S3CR3TPART", "Q/UERY", "Q%2FUERY", "\x1b"} {
				assert.NotContains(t, msg, secret, path)
			}
			assert.Less(t, len(err.Error()), 600, "the answer is bounded")
			if strings.Contains(path, "moved") {
				assert.Contains(t, err.Error(), "307 Temporary Redirect (a redirect, not followed)")
			} else {
				assert.Contains(t, err.Error(), "bad request: POST xxxxx?xxxxx path=xxxxx")
				assert.Contains(t, err.Error(), `\x1b]52`, "a control character is shown escaped")
			}
			require.NoError(t, q.Resume(context.Background()))
		}
		assert.Zero(t, elsewhere.Load(), "nothing was posted where the redirect pointed")
	})
}

// A webhook that answers 429 with a Retry-After of an hour is tried again
// within the client's longest wait (30 s in production, 150 ms here), not
// after an hour: a long sleep would hold every lane's alerts and the run's
// heartbeat, and let another process post the same alert meanwhile.
func TestWebhookRetryAfterIsCapped(t *testing.T) {
	c := newClient(5 * time.Millisecond)
	resp := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"3600"}}}
	assert.Equal(t, c.RetryWaitMax, c.Backoff(c.RetryWaitMin, c.RetryWaitMax, 1, resp))

	forEachStore(t, func(t *testing.T, db *sql.DB) {
		var posts atomic.Int32
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if posts.Add(1) == 1 {
				w.Header().Set("Retry-After", "3600")
				w.WriteHeader(http.StatusTooManyRequests)
			}
		}))
		defer hook.Close()
		q := newQueue(t, db)
		enqueue(t, q, db, 3)
		a := newAlerter(t, db, q, Thresholds{Backlog: 2}, Options{WebhookURL: hook.URL})
		// Far beyond the capped wait, far below the hour.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, a.Check(ctx))
		require.NoError(t, ctx.Err(), "Check waited for the Retry-After")
		assert.EqualValues(t, 2, posts.Load(), "the alert, refused once, then posted")
	})
}

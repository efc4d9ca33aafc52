package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/mailspool/mailspool/internal/termsafe"
)

// Alert is the JSON body posted to the webhook (unless Options.Slack).
type Alert struct {
	Lane      string  `json:"lane"`
	Condition string  `json:"condition"` // backlog, failure_rate, stuck, paused, restarting
	State     string  `json:"state"`     // firing or resolved
	Summary   string  `json:"summary"`
	Value     float64 `json:"value"`
	Threshold float64 `json:"threshold,omitempty"`
	// Worker is the process that posted it.
	Worker string    `json:"worker"`
	At     time.Time `json:"at"`
	// Since is when a resolved condition started firing.
	Since *time.Time `json:"since,omitempty"`
}

// Text is the alert as one line of text: the Slack message.
func (a Alert) Text() string {
	switch a.State {
	case "resolved":
		s := fmt.Sprintf("[mailspool] RESOLVED lane %s %s: %s", a.Lane, a.Condition, a.Summary)
		if a.Since != nil {
			s += fmt.Sprintf(" (fired for %v)", a.At.Sub(*a.Since).Round(time.Second))
		}
		return s
	default:
		return fmt.Sprintf("[mailspool] FIRING lane %s %s: %s", a.Lane, a.Condition, a.Summary)
	}
}

// newClient returns the webhook client: up to 4 retries on connection
// errors, 429 and 5xx, waiting from wait doubling up to 30 × wait, and no
// logging of its own (its log lines would show the URL).
func newClient(wait time.Duration) *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.RetryMax = 4
	c.RetryWaitMin = wait
	c.RetryWaitMax = 30 * wait
	// The default backoff waits as long as a 429 or 503's Retry-After
	// says, however long: an endpoint answering "Retry-After: 86400" would
	// hold every alert and the run's heartbeat for days.
	c.Backoff = func(lo, hi time.Duration, attempt int, resp *http.Response) time.Duration {
		return min(retryablehttp.DefaultBackoff(lo, hi, attempt, resp), hi)
	}
	c.ErrorHandler = retryablehttp.PassthroughErrorHandler
	c.HTTPClient.Timeout = 10 * time.Second
	// A redirect is an answer, not a place to post to: an alert (and
	// whatever the URL's path or query carries) never goes elsewhere.
	c.HTTPClient.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// maxSnippet bounds how much of a webhook's error answer is read and
// shown.
const maxSnippet = 200

// redactAnswer returns the start of a webhook's answer safe to log: the
// webhook URL's secrets (password, path segments, query values, the URL
// itself, as written and escaped) replaced by xxxxx, since an answer may
// echo the request line; control characters escaped.
func redactAnswer(webhook string, answer []byte) string {
	s := string(bytes.TrimSpace(answer))
	var secrets []string
	add := func(v string) {
		if len(v) >= 3 {
			secrets = append(secrets, v, url.PathEscape(v), url.QueryEscape(v))
		}
	}
	add(webhook)
	if u, err := url.Parse(webhook); err == nil {
		add(u.RawQuery)
		add(u.EscapedPath())
		if p, ok := u.User.Password(); ok {
			add(p)
		}
		add(u.User.Username())
		for seg := range strings.SplitSeq(u.Path, "/") {
			add(seg)
		}
		for _, vs := range u.Query() {
			for _, v := range vs {
				add(v)
			}
		}
	}
	// Longest first, so that a secret containing another is replaced whole.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, v := range secrets {
		s = strings.ReplaceAll(s, v, "xxxxx")
	}
	return termsafe.Escape(s)
}

// post sends msg to the webhook. Its errors never contain the URL.
func (a *Alerter) post(ctx context.Context, msg Alert) error {
	var v any = msg
	if a.opts.Slack {
		v = map[string]string{"text": msg.Text()}
	}
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, a.opts.WebhookURL, body)
	if err != nil {
		return errors.New("alert: bad webhook request") // the error would quote the URL
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("alert: posting to the webhook: %w", err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, maxSnippet))
	if resp.StatusCode/100 != 2 {
		where := ""
		if loc := resp.Header.Get("Location"); loc != "" {
			where = " (a redirect, not followed)"
		}
		return fmt.Errorf("alert: the webhook answered %s%s: %s", redactAnswer(a.opts.WebhookURL, []byte(resp.Status)), where, redactAnswer(a.opts.WebhookURL, snippet))
	}
	return nil
}

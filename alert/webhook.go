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
	"time"

	"github.com/hashicorp/go-retryablehttp"
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
	c.ErrorHandler = retryablehttp.PassthroughErrorHandler
	c.HTTPClient.Timeout = 10 * time.Second
	return c
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
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("alert: the webhook answered %s: %s", resp.Status, bytes.TrimSpace(snippet))
	}
	return nil
}

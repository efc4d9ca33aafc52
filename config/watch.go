package config

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mailspool/mailspool/alert"
	"github.com/mailspool/mailspool/internal/duration"
)

// alertsConfig is the [alerts] section:
//
//	[alerts]
//	webhook  = "https://hooks.example.com/T000/B000/XXXX"  # or MAILSPOOL_ALERT_WEBHOOK
//	format   = "slack"                                     # or "json" (default)
//	interval = "1m"
type alertsConfig struct {
	Webhook  string `toml:"webhook"`
	Format   string `toml:"format"`
	Interval string `toml:"interval"`
}

// laneAlertsConfig is a lane's [lanes.NAME.alerts] section.
type laneAlertsConfig struct {
	Backlog     int64   `toml:"backlog"`
	FailureRate float64 `toml:"failure_rate"`
	MinAttempts int64   `toml:"min_attempts"`
	Restarts    int     `toml:"restarts"`
	// ComplaintRate is a fraction (0.002); ComplaintWindow a duration.
	ComplaintRate   float64 `toml:"complaint_rate"`
	ComplaintWindow string  `toml:"complaint_window"`
}

// Alerts says where and how alerts are posted (package alert).
type Alerts struct {
	// WebhookURL is a secret (its path usually holds a token): never log it.
	WebhookURL string
	// Slack posts {"text": ...} instead of the JSON alert.
	Slack    bool
	Interval time.Duration
}

// maxAlertInterval bounds [alerts] interval: an alert checked less than
// daily is no alert.
const maxAlertInterval = 24 * time.Hour

// AlertWebhookEnv replaces [alerts] webhook, so the token can stay out of
// the config file.
const AlertWebhookEnv = "MAILSPOOL_ALERT_WEBHOOK"

// AdminListenEnv replaces admin_listen: a host:port, or "off" for no
// admin listener (one worker process per lane, each with its own address
// or none).
const AdminListenEnv = "MAILSPOOL_ADMIN_LISTEN"

// ParseAdminListen checks an admin listener address, admin_listen's or
// MAILSPOOL_ADMIN_LISTEN's: a host:port, or "off", which returns "" (no
// listener). what names the value's source in the error.
func ParseAdminListen(what, s string) (string, error) {
	if s == "off" {
		return "", nil
	}
	_, port, err := net.SplitHostPort(s)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("config: %s: %q is not host:port (e.g. 127.0.0.1:9465) or off", what, s)
	}
	return s, nil
}

// loadWatch reads admin_listen (or MAILSPOOL_ADMIN_LISTEN) and [alerts].
func (c *Config) loadWatch(fc *fileConfig) error {
	if fc.AdminListen != "" {
		addr, err := ParseAdminListen("admin_listen", fc.AdminListen)
		if err != nil {
			return err
		}
		c.AdminListen = addr
	}
	if v := os.Getenv(AdminListenEnv); v != "" {
		addr, err := ParseAdminListen(AdminListenEnv, v)
		if err != nil {
			return err
		}
		c.AdminListen = addr
	}
	webhook := os.Getenv(AlertWebhookEnv)
	if fc.Alerts == nil && webhook == "" {
		return nil
	}
	a := &Alerts{WebhookURL: webhook}
	ac := alertsConfig{}
	if fc.Alerts != nil {
		ac = *fc.Alerts
	}
	if a.WebhookURL == "" {
		a.WebhookURL = ac.Webhook
	}
	if a.WebhookURL == "" {
		return fmt.Errorf("config: alerts.webhook: missing (an http(s) URL, or set %s)", AlertWebhookEnv)
	}
	switch ac.Format {
	case "", "json":
	case "slack":
		a.Slack = true
	default:
		return fmt.Errorf("config: alerts.format: %q is not json or slack", ac.Format)
	}
	if ac.Interval != "" {
		d, err := duration.Positive(ac.Interval)
		if err != nil || d <= 0 || d > maxAlertInterval {
			return fmt.Errorf("config: alerts.interval: %q is not a positive duration of at most %v", ac.Interval, maxAlertInterval)
		}
		a.Interval = d
	}
	// Check the URL now, without quoting it in the error.
	if _, err := alert.New(nil, alert.Options{WebhookURL: a.WebhookURL}); err != nil {
		return fmt.Errorf("config: alerts.webhook: %w", err)
	}
	c.Alerts = a
	return nil
}

// laneAlerts reads a lane's thresholds.
func laneAlerts(name, transportURL string, lc *laneAlertsConfig, alerting bool) (alert.Thresholds, error) {
	if lc == nil {
		return alert.Thresholds{}, nil
	}
	if !alerting {
		return alert.Thresholds{}, fmt.Errorf("config: lanes.%s.alerts: thresholds, but no [alerts] section says where to post (or set %s)", name, AlertWebhookEnv)
	}
	t := alert.Thresholds{Backlog: lc.Backlog, FailureRate: lc.FailureRate, MinAttempts: lc.MinAttempts, Restarts: lc.Restarts, ComplaintRate: lc.ComplaintRate}
	if scheme, _, ok := strings.Cut(transportURL, "://"); ok && lc.ComplaintRate > 0 {
		t.ComplaintProvider = strings.ToLower(scheme)
	}
	if lc.ComplaintWindow != "" {
		d, err := duration.Positive(lc.ComplaintWindow)
		if err != nil {
			return t, fmt.Errorf("config: lanes.%s.alerts.complaint_window: %w", name, err)
		}
		t.ComplaintWindow = d
	}
	if err := t.Validate(); err != nil {
		return t, fmt.Errorf("config: lanes.%s.alerts: %w", name, err)
	}
	return t, nil
}

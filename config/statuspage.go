package config

import (
	"fmt"
	"os"

	"github.com/mailspool/mailspool/admin/statuspage"
)

// statusPageConfig is the [status_page] section: the status page the
// admin listener serves at / (package admin/statuspage).
//
//	[status_page]
//	actions        = true    # retry, cancel, pause and resume buttons (default: read-only)
//	show_addresses = false   # recipient addresses in full (default: j***@example.com)
//	user           = "ops"   # basic credentials; the password in MAILSPOOL_STATUS_PASSWORD
//
// The bearer token comes from MAILSPOOL_STATUS_TOKEN (or token = "...").
// Credentials are required when admin_listen is not a loopback address.
type statusPageConfig struct {
	Actions       bool   `toml:"actions"`
	ShowAddresses bool   `toml:"show_addresses"`
	User          string `toml:"user"`
	Password      string `toml:"password"`
	Token         string `toml:"token"`
}

// The environment variables that replace the status page's credentials,
// so that the secrets can stay out of the config file.
const (
	StatusUserEnv     = "MAILSPOOL_STATUS_USER"
	StatusPasswordEnv = "MAILSPOOL_STATUS_PASSWORD"
	StatusTokenEnv    = "MAILSPOOL_STATUS_TOKEN"
)

// loadStatusPage reads [status_page] and its environment variables.
func (c *Config) loadStatusPage(fc *fileConfig) error {
	sc := statusPageConfig{}
	if fc.StatusPage != nil {
		sc = *fc.StatusPage
	}
	creds := statuspage.Credentials{User: sc.User, Password: sc.Password, Token: sc.Token}
	for env, dst := range map[string]*string{StatusUserEnv: &creds.User, StatusPasswordEnv: &creds.Password, StatusTokenEnv: &creds.Token} {
		if v := os.Getenv(env); v != "" {
			*dst = v
		}
	}
	// Check now (the check never quotes a secret), so the mistake is named
	// before a worker starts.
	if err := statuspage.CheckListen("127.0.0.1:0", creds); err != nil {
		return fmt.Errorf("config: status_page: %w (user, and password or %s)", err, StatusPasswordEnv)
	}
	c.StatusPage = statuspage.Options{Credentials: creds, Actions: sc.Actions, ShowAddresses: sc.ShowAddresses}
	return nil
}

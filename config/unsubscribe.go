package config

import (
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/mailspool/mailspool/suppress"
	"github.com/mailspool/mailspool/unsubscribe"
)

// unsubscribeConfig is the [unsubscribe] table: RFC 8058 one-click
// unsubscribe for the lanes marked bulk (package unsubscribe).
//
//	[unsubscribe]
//	url    = "https://mail.example.com/u/"   # where mailspool serve answers /u/
//	mailto = "unsubscribe@example.com"       # optional second method
//
//	[[unsubscribe.keys]]                     # the first key signs
//	id         = "2026b"
//	secret_env = "MAILSPOOL_UNSUBSCRIBE_KEY" # 32+ random bytes, hex or base64
//
//	[[unsubscribe.keys]]                     # a retired key verifies until
//	id         = "2026a"
//	secret_env = "MAILSPOOL_UNSUBSCRIBE_KEY_OLD"
//	until      = "2027-03-01T00:00:00Z"
//
//	[lanes.news]
//	bulk = true
type unsubscribeConfig struct {
	URL    string              `toml:"url"`
	Mailto string              `toml:"mailto"`
	Keys   []unsubscribeKeyCfg `toml:"keys"`
}

type unsubscribeKeyCfg struct {
	ID        string `toml:"id"`
	SecretEnv string `toml:"secret_env"`
	Until     string `toml:"until"`
}

// Unsubscribe is the validated [unsubscribe] table.
type Unsubscribe struct {
	Signer *unsubscribe.Signer // holds the secrets: never log it
	Links  unsubscribe.Links
}

// loadUnsubscribe reads [unsubscribe]; nil without one.
func loadUnsubscribe(uc *unsubscribeConfig) (*Unsubscribe, error) {
	if uc == nil {
		return nil, nil
	}
	u := &Unsubscribe{Links: unsubscribe.Links{URL: uc.URL, Mailto: uc.Mailto}}
	if err := u.Links.Check(); err != nil {
		return nil, fmt.Errorf("config: %s", strings.Replace(err.Error(), "unsubscribe: ", "unsubscribe.", 1))
	}
	if len(uc.Keys) == 0 {
		return nil, fmt.Errorf("config: unsubscribe.keys: none ([[unsubscribe.keys]] id = \"k1\", secret_env = \"MAILSPOOL_UNSUBSCRIBE_KEY\"; the variable holds 32 random bytes or more, hex or base64: openssl rand -hex 32)")
	}
	keys := make([]unsubscribe.Key, len(uc.Keys))
	for i, kc := range uc.Keys {
		where := fmt.Sprintf("config: unsubscribe.keys[%d]", i)
		if kc.SecretEnv == "" {
			return nil, fmt.Errorf("%s.secret_env: missing (the variable that holds the key; secrets are not written in the file)", where)
		}
		v := strings.TrimSpace(os.Getenv(kc.SecretEnv))
		if v == "" {
			return nil, fmt.Errorf("%s.secret_env: %s is empty or not set", where, kc.SecretEnv)
		}
		secret, err := hex.DecodeString(v)
		if err != nil {
			if secret, err = base64.StdEncoding.DecodeString(v); err != nil {
				return nil, fmt.Errorf("%s.secret_env: %s is neither hex nor base64", where, kc.SecretEnv)
			}
		}
		keys[i] = unsubscribe.Key{ID: kc.ID, Secret: secret}
		if kc.Until != "" {
			if keys[i].Until, err = time.Parse(time.RFC3339, kc.Until); err != nil {
				return nil, fmt.Errorf("%s.until: %q is not an RFC 3339 time (2027-03-01T00:00:00Z)", where, kc.Until)
			}
		}
	}
	var err error
	if u.Signer, err = unsubscribe.NewSigner(keys); err != nil {
		return nil, fmt.Errorf("config: unsubscribe.keys: %s", strings.TrimPrefix(err.Error(), "unsubscribe: "))
	}
	return u, nil
}

// screenLane sets the Screen of lane l on list: the lane's suppression
// policy, and for a bulk lane the unsubscribe headers and list scopes.
// others names every lane of the deployment: no list may take one's name.
func screenLane(list *suppress.List, l *Lane, others []string) error {
	if l.Bulk == nil {
		l.Lane.Screen = list.Screen(l.Lane.Name, l.Suppression)
		return nil
	}
	s, err := unsubscribe.Lane(list, l.Lane.Name, l.Suppression, l.Bulk.Signer, l.Bulk.Links, others...)
	if err != nil {
		return err
	}
	l.Lane.Screen = s
	return nil
}

// UnsubscribeHandler returns the /u/ handler on db, nil without
// [unsubscribe]. A nil log is slog.Default().
func (c *Config) UnsubscribeHandler(db *sql.DB, log *slog.Logger) (*unsubscribe.Handler, error) {
	if c.Unsubscribe == nil {
		return nil, nil
	}
	list, err := suppress.Open(db)
	if err != nil {
		return nil, err
	}
	return unsubscribe.NewHandler(c.Unsubscribe.Signer, list, log), nil
}

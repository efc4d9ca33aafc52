package smtp

import (
	"encoding/base64"
	"errors"
	"strings"

	"github.com/mailspool/mailspool/transport"
)

// secretForms are the ways the credentials can come back in a server reply:
// some servers quote the AUTH line they refused ("535 5.7.8 Authentication
// failed: AGFwaWtleQBzM2NyM3Q="). They are the base64 encodings of the
// AUTH PLAIN blob (with and without an authorization identity) and of the
// AUTH LOGIN password, without padding so that a padded echo matches too,
// and the password itself when it is long enough not to hide ordinary
// words.
func secretForms(username, password string) []string {
	if password == "" {
		return nil
	}
	enc := base64.RawStdEncoding.EncodeToString
	forms := []string{
		enc([]byte("\x00" + username + "\x00" + password)),
		enc([]byte(username + "\x00" + username + "\x00" + password)),
		enc([]byte(password)),
	}
	if len(password) >= 4 {
		forms = append(forms, password)
	}
	return forms
}

// hide replaces every secret form in s.
func (c *config) hide(s string) string {
	for _, f := range c.secrets {
		s = strings.ReplaceAll(s, f, "xxxxx")
	}
	return s
}

// shows reports whether s contains a secret form.
func (c *config) shows(s string) bool {
	for _, f := range c.secrets {
		if strings.Contains(s, f) {
			return true
		}
	}
	return false
}

// redact removes the credentials from an outcome before it leaves the
// adapter for last_error, logs or the command line. An error that shows
// them is replaced by a *transport.Error of the same kind, code and retry
// hint whose texts are redacted; its cause is then only text.
func (c *config) redact(r transport.Receipt, err error) (transport.Receipt, error) {
	r.Response = c.hide(r.Response)
	if err == nil {
		return r, nil
	}
	var te *transport.Error
	found := errors.As(err, &te)
	if !c.shows(err.Error()) && (!found || !c.shows(te.Detail)) {
		return r, err
	}
	if !found {
		return r, errors.New(c.hide(err.Error()))
	}
	clean := *te
	clean.Detail = c.hide(te.Detail)
	if te.Err != nil {
		clean.Err = errors.New(c.hide(te.Err.Error()))
	}
	return r, &clean
}

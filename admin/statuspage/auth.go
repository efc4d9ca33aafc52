package statuspage

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// Credentials are what a request must carry: the bearer token
// ("Authorization: Bearer TOKEN", for scripts and proxies), or the basic
// user and password (what a browser asks for). Either is enough when both
// are set; the zero Credentials require nothing.
type Credentials struct {
	Token    string
	User     string
	Password string
}

// IsZero reports whether c requires nothing.
func (c Credentials) IsZero() bool { return c == Credentials{} }

func (c Credentials) check() error {
	if (c.User == "") != (c.Password == "") {
		return errors.New("statuspage: basic credentials need both a user and a password")
	}
	if strings.ContainsRune(c.User, ':') {
		return errors.New("statuspage: the basic user may not contain ':'")
	}
	return nil
}

// CheckListen returns an error when addr (host:port) is not a loopback
// address and c requires nothing: anyone who reaches the listener would see
// the queue. An empty host, 0.0.0.0 and [::] listen on every interface.
func CheckListen(addr string, c Credentials) error {
	if err := c.check(); err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("statuspage: %q is not host:port", addr)
	}
	if !c.IsZero() || loopback(host) {
		return nil
	}
	return fmt.Errorf("statuspage: %s is not a loopback address: the status page needs credentials there (a token, or a user and password; see [status_page])", addr)
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// same compares two secrets in constant time (their hashes, so that the
// time does not tell the length either).
func same(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// authorize checks r's credentials; who names the one who sent it, for the
// log of actions: the basic user, "bearer token", or without credentials
// the basic user of an application's own authentication if any, else
// "anonymous".
func (p *Page) authorize(r *http.Request) (who string, ok bool) {
	c := p.opts.Credentials
	user, password, basic := r.BasicAuth()
	if c.IsZero() {
		if basic && user != "" {
			return user, true
		}
		return "anonymous", true
	}
	if c.Token != "" {
		if scheme, token, found := strings.Cut(r.Header.Get("Authorization"), " "); found && strings.EqualFold(scheme, "Bearer") && same(token, c.Token) {
			return "bearer token", true
		}
	}
	if c.User != "" && basic {
		// Both compared, always: the time does not tell which was wrong.
		userOK, passwordOK := same(user, c.User), same(password, c.Password)
		if userOK && passwordOK {
			return c.User, true
		}
	}
	return "", false
}

// challenge answers 401, naming the schemes that would do.
func (p *Page) challenge(w http.ResponseWriter) {
	if p.opts.Credentials.User != "" {
		w.Header().Add("WWW-Authenticate", `Basic realm="mailspool status", charset="UTF-8"`)
	}
	if p.opts.Credentials.Token != "" {
		w.Header().Add("WWW-Authenticate", `Bearer realm="mailspool status"`)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	fmt.Fprintln(w, "statuspage: credentials required")
}

type whoKey struct{}

func withWho(ctx context.Context, who string) context.Context {
	return context.WithValue(ctx, whoKey{}, who)
}

func who(ctx context.Context) string {
	s, _ := ctx.Value(whoKey{}).(string)
	return s
}

package smtp

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

// config is Options resolved against a host: defaults filled in, the
// password read and the TLS configuration built.
type config struct {
	host        string
	addr        string
	tlsMode     TLSMode
	username    string
	password    string
	timeout     time.Duration
	helo        string
	idleTimeout time.Duration
	pool        int
	tls         *tls.Config
	secrets     []string // forms of the credentials to hide in replies
}

// relay reports whether the lane submits through a relay rather than to
// the recipient's own mail server: it logs in, or talks to a submission
// port (587, 465). A relay's refusal of our sender is about us, never about
// the recipient (see classify.Session).
func (c *config) relay() bool {
	_, port, _ := net.SplitHostPort(c.addr)
	return c.username != "" || port == "587" || port == "465"
}

// resolve checks o for host and port and fills in the defaults. Its errors
// never contain the password.
func resolve(host string, port int, o Options) (*config, error) {
	c := &config{
		host: host, tlsMode: o.TLS, username: o.Username, password: o.Password,
		timeout: o.Timeout, helo: o.HELO, idleTimeout: o.IdleTimeout, pool: o.Pool,
	}
	if host == "" || strings.ContainsAny(host, " \t\r\n/@") {
		return nil, fmt.Errorf("smtp: invalid host %q", host)
	}
	switch c.tlsMode {
	case "":
		c.tlsMode = StartTLS
	case StartTLS, ImplicitTLS, NoTLS:
	default:
		return nil, fmt.Errorf("smtp: tls is %q, want starttls, implicit or none", o.TLS)
	}
	if port == 0 {
		port = 587
		if c.tlsMode == ImplicitTLS {
			port = 465
		}
	}
	if port < 0 || port > 65535 {
		return nil, fmt.Errorf("smtp: invalid port %d", port)
	}
	c.addr = net.JoinHostPort(host, fmt.Sprint(port))
	if err := c.resolveCredentials(o); err != nil {
		return nil, err
	}
	if c.timeout < 0 || c.idleTimeout < 0 || c.pool < 0 {
		return nil, errors.New("smtp: timeout, idle_timeout and pool cannot be negative")
	}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.idleTimeout == 0 {
		c.idleTimeout = DefaultIdleTimeout
	}
	if c.pool == 0 {
		c.pool = DefaultPool
	}
	if c.helo == "" {
		name, err := os.Hostname()
		if err != nil || name == "" {
			name = "localhost"
		}
		c.helo = name
	}
	if strings.ContainsAny(c.helo, " \t\r\n") {
		return nil, fmt.Errorf("smtp: helo %q contains white space", c.helo)
	}
	if c.tlsMode != NoTLS {
		var err error
		if c.tls, err = tlsConfig(host, o); err != nil {
			return nil, err
		}
	} else if o.ServerName != "" || o.CAFile != "" {
		return nil, errors.New("smtp: server_name and ca_file need TLS, but tls is none")
	}
	return c, nil
}

// resolveCredentials reads the password from the environment if asked to
// and enforces that credentials never travel in clear to a remote host.
func (c *config) resolveCredentials(o Options) error {
	if o.PasswordEnv != "" {
		if o.Password != "" {
			return errors.New("smtp: both a password and password_env are set; use one")
		}
		pw, ok := os.LookupEnv(o.PasswordEnv)
		if !ok || pw == "" {
			return fmt.Errorf("smtp: environment variable %q named by password_env is not set", o.PasswordEnv)
		}
		c.password = pw
	}
	switch {
	case c.username == "" && c.password != "":
		return errors.New("smtp: a password is set but no user name")
	case c.username != "" && c.password == "":
		return fmt.Errorf("smtp: user %q has no password (give one in the URL or with password_env)", c.username)
	case strings.ContainsAny(c.username, "\x00\r\n") || strings.ContainsAny(c.password, "\x00\r\n"):
		return errors.New("smtp: user name or password contains NUL, CR or LF")
	case c.username != "" && c.tlsMode == NoTLS && !loopback(c.host):
		return fmt.Errorf("smtp: tls is none, so the password would cross the network in clear to %q; credentials without TLS are only sent to a loopback host", c.host)
	}
	c.secrets = secretForms(c.username, c.password)
	return nil
}

// loopback reports whether host is localhost or a loopback IP address.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// tlsConfig builds the client TLS configuration: TLS 1.2 or later, the
// server name to verify, and the CA file's roots when one is given.
func tlsConfig(host string, o Options) (*tls.Config, error) {
	cfg := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	if o.ServerName != "" {
		cfg.ServerName = o.ServerName
	}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("smtp: read ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("smtp: ca_file %q holds no PEM certificate", o.CAFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

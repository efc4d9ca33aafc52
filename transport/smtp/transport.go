package smtp

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/internal/render"
)

// TLSMode says how a connection is protected.
type TLSMode string

const (
	// StartTLS upgrades a plain connection with STARTTLS and fails when the
	// server does not offer it. The default.
	StartTLS TLSMode = "starttls"
	// ImplicitTLS speaks TLS from the first byte (port 465, "smtps").
	ImplicitTLS TLSMode = "implicit"
	// NoTLS sends everything in clear: only for a local relay or tests.
	NoTLS TLSMode = "none"
)

// Defaults used for zero Options fields.
const (
	DefaultTimeout     = 30 * time.Second
	DefaultIdleTimeout = 30 * time.Second
	DefaultPool        = 4
)

// Options configure a Transport. Each field is one URL query parameter (see
// the package documentation); the zero value means the default.
type Options struct {
	// TLS is the protection mode; "" means StartTLS.
	TLS TLSMode
	// Username and Password authenticate with AUTH PLAIN or LOGIN. An empty
	// Username means no AUTH.
	Username string
	Password string
	// PasswordEnv names an environment variable that holds the password;
	// Open reads it. Set at most one of Password and PasswordEnv.
	PasswordEnv string
	// Timeout bounds each read and write on the connection (each command
	// and its reply, each chunk of DATA); 0 means DefaultTimeout.
	Timeout time.Duration
	// HELO is the name sent with EHLO; "" means this machine's host name.
	HELO string
	// ServerName is the name the server's certificate must match; "" means
	// the host given to Open.
	ServerName string
	// CAFile is a PEM file of CA certificates trusted instead of the system
	// roots; "" means the system roots.
	CAFile string
	// IdleTimeout is how long a connection waits in the pool for the next
	// message before it is closed; 0 means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Pool is the most connections open at once; 0 means DefaultPool.
	Pool int
}

// Transport sends mail to one SMTP server over a small pool of reused
// connections. It is safe for concurrent use.
type Transport struct {
	cfg  *config
	pool *pool
}

// Open returns a Transport for the SMTP server at host and port (0 means
// 587, or 465 with implicit TLS); nil opts means the defaults. It checks
// the options, reads the password from the environment and the CA file,
// but does not connect: the first Send does, so ctx is not used.
func Open(_ context.Context, host string, port int, opts *Options) (*Transport, error) {
	if opts == nil {
		opts = &Options{}
	}
	cfg, err := resolve(host, port, *opts)
	if err != nil {
		return nil, err
	}
	return &Transport{cfg: cfg, pool: newPool(cfg.pool, cfg.idleTimeout)}, nil
}

// Send delivers m in one SMTP transaction on a pooled or new connection.
// An invalid m is a Permanent error and nothing is sent. The Receipt holds
// the Message-ID header the mail went out with (m.MessageID, or a fresh one
// when it is empty) and the server's 250 reply.
//
// No outcome shows the credentials, not even a server reply that echoes
// the AUTH exchange.
func (t *Transport) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	return t.cfg.redact(t.send(ctx, m))
}

func (t *Transport) send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	if err := m.Validate(); err != nil {
		return transport.Receipt{}, &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeMessage, Rule: "invalid-message", Detail: "invalid message", Err: err}
	}
	for {
		s, reused, err := t.session(ctx)
		if err != nil {
			return transport.Receipt{}, err
		}
		if err := tooBig(s, m); err != nil {
			t.pool.put(s)
			return transport.Receipt{}, err
		}
		msg, err := t.render(s, m)
		if err != nil {
			t.pool.put(s)
			return transport.Receipt{}, err
		}
		stop := s.conn.bind(ctx)
		response, err := transaction(s.sc, msg)
		keep := err == nil || reusable(s.sc, err)
		interrupted := !stop()
		if keep && !interrupted {
			t.pool.put(s)
		} else {
			t.pool.discard(s)
		}
		// A 250 after the DATA terminator is a delivery even if the context
		// ended right after it.
		if err == nil {
			return transport.Receipt{MessageID: render.MessageID(msg.Msg), Response: response}, nil
		}
		if reused && !interrupted && staleAtMail(err) {
			// The server let the idle connection go (or says it is about
			// to) before this transaction began: nothing of the mail was
			// taken, so it goes out on another connection.
			continue
		}
		if interrupted {
			err = fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		return transport.Receipt{}, t.sendError(err)
	}
}

// render builds the mail for session s. Without SMTPUTF8 on the server,
// internationalized domains go out as A-labels, and an address whose local
// part is not ASCII cannot be written at all (render.Unwritable: the
// recipient's fails the mail, our own is about the lane's sender).
func (t *Transport) render(s *session, m *transport.Message) (*render.Mail, error) {
	if ok, _ := s.sc.Extension("SMTPUTF8"); !ok {
		a, err := render.ASCII(m)
		if te := render.Unwritable(err, t.cfg.addr); te != nil {
			return nil, te
		}
		if err != nil {
			return nil, &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeMessage, Detail: "invalid message", Err: err}
		}
		m = a
	}
	msg, err := render.Render(m)
	if err != nil {
		return nil, &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeMessage, Detail: "invalid message", Err: err}
	}
	return msg, nil
}

// tooBig refuses m before its transaction when the server's SIZE (RFC
// 1870, from its EHLO reply) is smaller than m's encoded size: a Permanent
// error about the message, which no retry can fix; nothing is sent, and
// the session stays usable.
func tooBig(s *session, m *transport.Message) error {
	ok, param := s.sc.Extension("SIZE")
	if !ok {
		return nil
	}
	limit, err := strconv.Atoi(strings.TrimSpace(param))
	if err != nil || limit <= 0 { // "SIZE" alone or "SIZE 0": no limit declared
		return nil
	}
	if n := m.EncodedSize(); n > limit {
		return &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeMessage, Enhanced: "5.3.4", Rule: "smtp-size",
			Detail: fmt.Sprintf("message of %d bytes encoded is over the server's SIZE limit of %d", n, limit)}
	}
	return nil
}

// session returns a session that is ready for MAIL FROM, holding one pool
// slot: an idle one that still looks usable (reused), or a new one.
func (t *Transport) session(ctx context.Context) (s *session, reused bool, err error) {
	if err := ctx.Err(); err != nil {
		// Checked first: an ended context would fail the NOOP of a healthy
		// idle session and cost the pool a good connection.
		return nil, false, t.setupError(ctx, "send to", err)
	}
	if err := t.pool.acquire(ctx); errors.Is(err, transport.ErrClosed) {
		return nil, false, &transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane, Rule: "transport-closed", Err: err}
	} else if err != nil {
		return nil, false, t.setupError(ctx, "wait for a connection to", err)
	}
	for s := t.pool.take(); s != nil; s = t.pool.take() {
		if s.usable(ctx) {
			return s, true, nil
		}
		s.close()
		if err := ctx.Err(); err != nil {
			// The NOOP failed because ctx ended: the other idle sessions
			// are not to blame, and stay in the pool.
			t.pool.release()
			return nil, false, t.setupError(ctx, "send to", err)
		}
	}
	s, err = t.dial(ctx)
	if err != nil {
		t.pool.release()
		return nil, false, err
	}
	return s, false, nil
}

// Close closes the idle connections and makes later Sends fail; a Send in
// progress finishes on its connection, which is closed after it. Close is
// idempotent.
func (t *Transport) Close() error {
	t.pool.close()
	return nil
}

var _ transport.Transport = (*Transport)(nil)

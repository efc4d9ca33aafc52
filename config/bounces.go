package config

import (
	"context"
	"crypto/tls"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/emersion/go-smtp"

	"github.com/mailspool/mailspool/bounce"
	"github.com/mailspool/mailspool/inbound"
	"github.com/mailspool/mailspool/internal/certfile"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/suppress"
	"github.com/mailspool/mailspool/verp"
)

// bouncesConfig is the [bounces] table: VERP return paths for the lanes
// that ask for them (lanes.NAME.verp = true), and the SMTP listener of
// mailspool serve --smtp that receives the bounces and complaint reports
// sent to them (package bounce).
//
//	[bounces]
//	domain   = "bounces.example.com"  # its MX points at mailspool serve --smtp
//	key_env  = "MAILSPOOL_VERP_KEY"   # 32+ random bytes, hex or base64
//	listen   = "0.0.0.0:25"           # or mailspool serve --smtp ADDR
//	max_size = 10485760               # bytes of one report
//	tls_cert = "/etc/mailspool/bounces.crt"  # STARTTLS (both or neither; PEM,
//	tls_key  = "/etc/mailspool/bounces.key"  # a renewal is taken up live)
//
//	[lanes.news]
//	verp = true
type bouncesConfig struct {
	Domain  string `toml:"domain"`
	KeyEnv  string `toml:"key_env"`
	Listen  string `toml:"listen"`
	MaxSize int64  `toml:"max_size"`
	TLSCert string `toml:"tls_cert"`
	TLSKey  string `toml:"tls_key"`
}

// Bounces is the validated [bounces] table.
type Bounces struct {
	Signer  *verp.Signer // holds the key: never log it
	Listen  string       // "" unless the file or --smtp names it
	MaxSize int64        // 0: the listener's default
	// TLSCert and TLSKey are the PEM files of the listener's STARTTLS
	// certificate; both "" without STARTTLS. They are read when the
	// listener starts (BounceServer), not by every command that loads
	// the config.
	TLSCert, TLSKey string
}

// MaxBounceSize bounds [bounces] max_size.
const MaxBounceSize = 64 << 20

// loadBounces reads [bounces]; nil without one.
func loadBounces(bc *bouncesConfig) (*Bounces, error) {
	if bc == nil {
		return nil, nil
	}
	if bc.KeyEnv == "" {
		return nil, fmt.Errorf("config: bounces.key_env: missing (the variable that holds the VERP key: 32 random bytes or more, hex or base64: openssl rand -hex 32)")
	}
	v := strings.TrimSpace(os.Getenv(bc.KeyEnv))
	if v == "" {
		return nil, fmt.Errorf("config: bounces.key_env: %s is empty or not set", bc.KeyEnv)
	}
	key, err := hex.DecodeString(v)
	if err != nil {
		if key, err = base64.StdEncoding.DecodeString(v); err != nil {
			return nil, fmt.Errorf("config: bounces.key_env: %s is neither hex nor base64", bc.KeyEnv)
		}
	}
	b := &Bounces{Listen: bc.Listen, MaxSize: bc.MaxSize, TLSCert: bc.TLSCert, TLSKey: bc.TLSKey}
	if (b.TLSCert == "") != (b.TLSKey == "") {
		return nil, fmt.Errorf("config: bounces: tls_cert and tls_key go together (the STARTTLS certificate and its key, PEM files); one of them is missing")
	}
	if b.Signer, err = verp.New(key, bc.Domain); err != nil {
		return nil, fmt.Errorf("config: bounces: %s", strings.TrimPrefix(err.Error(), "verp: "))
	}
	if b.Listen != "" {
		_, port, err := net.SplitHostPort(b.Listen)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
			return nil, fmt.Errorf("config: bounces.listen: %q is not host:port (e.g. 0.0.0.0:25)", b.Listen)
		}
	}
	if b.MaxSize < 0 || b.MaxSize > MaxBounceSize {
		return nil, fmt.Errorf("config: bounces.max_size: %d is not between 1 and %d bytes", b.MaxSize, MaxBounceSize)
	}
	return b, nil
}

// verpLane gives lane l its VERP return path.
func verpLane(b *Bounces, l *Lane) error {
	if b == nil {
		return fmt.Errorf("config: lanes.%s.verp: configure [bounces] (domain, key_env) first", l.Lane.Name)
	}
	name := l.Lane.Name
	if err := verp.CheckLane(name); err != nil {
		return fmt.Errorf("config: lanes.%s.verp: the lane's name is over %d characters, too long for a return path", name, verp.MaxLane)
	}
	s := b.Signer
	l.Lane.ReturnPath = func(id int64) string {
		a, _ := s.Address(name, id) // the name was checked; ids are positive
		return a
	}
	return nil
}

// BounceServer returns the bounce listener (package bounce) on db, which
// finds the mail a return path names in the lane's queue. nil without
// [bounces].
func (c *Config) BounceServer(ctx context.Context, db *sql.DB, log *slog.Logger, observe func(inbound.Event)) (*smtp.Server, error) {
	if c.Bounces == nil {
		return nil, nil
	}
	queues := map[string]*queue.Queue{}
	policies := map[string]suppress.Policy{}
	for _, l := range c.Lanes {
		policies[l.Lane.Name] = l.Suppression
		if l.Lane.ReturnPath == nil {
			continue
		}
		q, err := queue.New(ctx, db, l.Lane, nil)
		if err != nil {
			return nil, fmt.Errorf("lane %s: %w", l.Lane.Name, err)
		}
		queues[l.Lane.Name] = q
	}
	var tlsConfig *tls.Config
	if c.Bounces.TLSCert != "" {
		r, err := certfile.Load(c.Bounces.TLSCert, c.Bounces.TLSKey, log)
		if err != nil {
			return nil, fmt.Errorf("bounces.tls_cert, bounces.tls_key: %w", err)
		}
		tlsConfig = r.ServerConfig()
	}
	return bounce.NewServer(db, bounce.Options{
		TLSConfig:   tlsConfig,
		Signer:      c.Bounces.Signer,
		MaxSize:     c.Bounces.MaxSize,
		Logger:      log,
		ObserveFunc: observe,
		Policy:      func(lane string) suppress.Policy { return policies[lane] },
		Mails: func(ctx context.Context, lane string, id int64) (bounce.Mail, error) {
			q := queues[lane]
			if q == nil {
				return bounce.Mail{}, bounce.ErrNoMail // a lane no longer configured
			}
			r, err := q.Row(ctx, id)
			if errors.Is(err, queue.ErrNotFound) {
				return bounce.Mail{}, bounce.ErrNoMail
			}
			if err != nil {
				return bounce.Mail{}, err
			}
			return bounce.Mail{Recipient: r.To, MessageID: r.MessageID, ProviderID: r.ProviderID}, nil
		},
	})
}

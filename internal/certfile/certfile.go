// Package certfile serves a TLS certificate kept in PEM files, and picks
// up a renewed one (certbot, cert-manager, an operator's copy) at the next
// handshake after the files change, without a restart.
//
// A renewal is two files written one after the other. A handshake that
// falls between them finds a certificate and a key that do not match:
// the reloader then keeps serving the previous pair and tries again at the
// next handshake, so a renewal never breaks the listener.
package certfile

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Reloader holds the certificate of a cert and key file pair.
type Reloader struct {
	certPath, keyPath string
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   [2]stamp // of the files the certificate was read from
	lastErr error    // the last failed reload, nil after a success
}

type stamp struct {
	mod  time.Time
	size int64
}

// Load reads the pair (PEM; the certificate file may hold the chain). Its
// errors name the files, never their contents. log (nil: slog.Default())
// gets a line when a changed pair is taken up, and one when it cannot be.
func Load(certPath, keyPath string, log *slog.Logger) (*Reloader, error) {
	if log == nil {
		log = slog.Default()
	}
	r := &Reloader{certPath: certPath, keyPath: keyPath, log: log}
	st, err := r.stat()
	if err != nil {
		return nil, err
	}
	if err := r.load(st); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Reloader) stat() ([2]stamp, error) {
	var st [2]stamp
	for i, p := range []string{r.certPath, r.keyPath} {
		fi, err := os.Stat(p)
		if err != nil {
			return st, fmt.Errorf("certfile: %w", err)
		}
		st[i] = stamp{fi.ModTime(), fi.Size()}
	}
	return st, nil
}

func (r *Reloader) load(st [2]stamp) error {
	c, err := tls.LoadX509KeyPair(r.certPath, r.keyPath)
	if err != nil {
		// tls's errors say what is wrong (no PEM data, a key that does
		// not match) and quote no key material.
		return fmt.Errorf("certfile: %s and %s: %w", r.certPath, r.keyPath, err)
	}
	r.cert, r.stamp = &c, st
	return nil
}

// GetCertificate is for tls.Config.GetCertificate: the current pair,
// read again when either file changed since it was read.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, err := r.stat()
	if err == nil && st != r.stamp {
		if err = r.load(st); err == nil {
			r.log.Info("certfile: renewed certificate taken up", "cert", r.certPath)
		}
	}
	// A file being replaced, or a certificate without its new key yet:
	// serve the previous pair and try again at the next handshake.
	if err != nil && r.lastErr == nil {
		r.log.Warn("certfile: serving the previous certificate", "err", err)
	}
	r.lastErr = err
	return r.cert, nil
}

// Err is the last reload's failure (the previous pair is being served),
// or nil.
func (r *Reloader) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr
}

// ServerConfig returns a server tls.Config that serves r's pair, TLS 1.2
// and later.
func (r *Reloader) ServerConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate}
}

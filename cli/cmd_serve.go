package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/mailspool/mailspool/admin"
	"github.com/mailspool/mailspool/config"
	"github.com/mailspool/mailspool/inbound"
	"github.com/mailspool/mailspool/metrics"
	"github.com/mailspool/mailspool/unsubscribe"
	"github.com/prometheus/client_golang/prometheus"
)

func runServe(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "serve", "[--db URL] [--config FILE] [--listen HOST:PORT] [--smtp HOST:PORT]")
	var sf storeFlags
	sf.register(fs)
	listen := fs.String("listen", "", "the public webhook endpoint's host:port (default: [serve] listen)")
	smtpAddr := fs.String("smtp", "", "the bounce listener's host:port, where the bounce domain's MX points (default: [bounces] listen; needs [bounces])")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, db, err := sf.open()
	if err != nil {
		return err
	}
	defer db.Close()
	if *smtpAddr == "" && cfg.Bounces != nil {
		*smtpAddr = cfg.Bounces.Listen
	}
	if *smtpAddr != "" && cfg.Bounces == nil {
		return errors.New("--smtp: the config has no [bounces] table: name the bounce domain (domain) and the VERP key (key_env); see docs/DELIVERABILITY.md")
	}
	if cfg.Serve == nil && *smtpAddr == "" {
		return errors.New("the config has no [serve] table: name the endpoint (listen) and at least one provider ([serve.sendgrid] verification_key, [serve.ses] topic_arns) or [unsubscribe]; or run the bounce listener alone with [bounces] and --smtp; see docs/DELIVERABILITY.md")
	}
	log := slog.New(slog.NewTextHandler(e.stderr, nil))
	counters := metrics.NewInbound()
	done := make(chan error, 2)
	var stops []func(context.Context) error
	if cfg.Serve != nil {
		addr := cfg.Serve.Listen
		if *listen != "" {
			addr = *listen
		}
		opts := counters.Options(cfg.Serve.Options)
		opts.Logger = log
		// Each event is stored with the lane and id of the mail it is about.
		if opts.Link, err = config.EventLinker(ctx, db, cfg.Lanes); err != nil {
			return err
		}
		if opts.LinkByMessageID, err = config.EventMessageLinker(ctx, db, cfg.Lanes); err != nil {
			return err
		}
		h, err := inbound.NewHandler(db, opts)
		if err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("/", h)
		unsub, err := cfg.UnsubscribeHandler(db, log)
		if err != nil {
			return err
		}
		if unsub != nil {
			counters.Unsubscribe(unsub)
			mux.Handle(unsubscribe.Prefix, unsub)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("serve: listen on %s: %w", addr, err)
		}
		srv := &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       60 * time.Second,
			MaxHeaderBytes:    32 << 10,
		}
		fmt.Fprintf(e.stderr, "mailspool serve: listening on %s\n", ln.Addr())
		go func() {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				done <- err
			}
		}()
		stops = append(stops, srv.Shutdown)
	}
	if *smtpAddr != "" {
		srv, err := cfg.BounceServer(ctx, db, log, counters.Observe)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", *smtpAddr)
		if err != nil {
			return fmt.Errorf("serve: --smtp: listen on %s: %w", *smtpAddr, err)
		}
		fmt.Fprintf(e.stderr, "mailspool serve: bounce listener on %s for %s\n", ln.Addr(), cfg.Bounces.Signer.Domain())
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, smtp.ErrServerClosed) {
				done <- err
			}
		}()
		stops = append(stops, srv.Shutdown)
	}
	if cfg.AdminListen != "" {
		reg := prometheus.NewRegistry()
		reg.MustRegister(counters)
		adm, err := admin.Listen(cfg.AdminListen, admin.Handler(reg, admin.NewHealth(db, nil)))
		if err != nil {
			return err
		}
		defer adm.Shutdown(context.WithoutCancel(ctx)) //nolint:errcheck // best effort at exit
		log.Info("admin listener", "addr", adm.Addr().String())
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var errs []error
	for _, stop := range stops {
		errs = append(errs, stop(sctx))
	}
	return errors.Join(errs...)
}

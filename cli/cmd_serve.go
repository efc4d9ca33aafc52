package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/mailspool/mailspool/admin"
	"github.com/mailspool/mailspool/inbound"
	"github.com/mailspool/mailspool/metrics"
	"github.com/mailspool/mailspool/unsubscribe"
	"github.com/prometheus/client_golang/prometheus"
)

func runServe(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "serve", "[--db URL] [--config FILE] [--listen HOST:PORT]")
	var sf storeFlags
	sf.register(fs)
	listen := fs.String("listen", "", "the public webhook endpoint's host:port (default: [serve] listen)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, db, err := sf.open()
	if err != nil {
		return err
	}
	defer db.Close()
	if cfg.Serve == nil {
		return errors.New("the config has no [serve] table: name the endpoint (listen) and at least one provider ([serve.sendgrid] verification_key, [serve.ses] topic_arns); see docs/DELIVERABILITY.md")
	}
	addr := cfg.Serve.Listen
	if *listen != "" {
		addr = *listen
	}
	log := slog.New(slog.NewTextHandler(e.stderr, nil))
	counters := metrics.NewInbound()
	opts := counters.Options(cfg.Serve.Options)
	opts.Logger = log
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
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

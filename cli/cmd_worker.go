package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/mailspool/mailspool/config"
)

func runWorker(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "worker", "[--db URL] [--config FILE] [--lane NAME] [--max-messages N] [--admin-listen HOST:PORT|off] [--log-level L] [--log-format text|json]")
	var sf storeFlags
	sf.register(fs)
	lane := filterString(fs, "lane", "run only this lane (default: every lane, each with its own worker and transport)")
	maxMessages := fs.Int("max-messages", 0, "exit 0 after this many mails per lane so systemd restarts the process fresh, 0 = never (default: the lane's max_messages)")
	adminListen := fs.String("admin-listen", "", "serve /metrics, /healthz and the status page on this host:port, or off (default: $"+config.AdminListenEnv+", else the config's admin_listen); one per process, so give each per-lane process its own or off")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error (a line per mail not sent is info, per mail sent debug)")
	logFormat := fs.String("log-format", "text", "text (key=value) or json (one object per line)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usageError{fmt.Sprintf("--log-level %q: want debug, info, warn or error", *logLevel)}
	}
	var log *slog.Logger
	switch *logFormat {
	case "text":
		log = slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	case "json":
		log = slog.New(slog.NewJSONHandler(e.stderr, &slog.HandlerOptions{Level: level, ReplaceAttr: secondsAttr}))
	default:
		return usageError{fmt.Sprintf("--log-format %q: want text or json", *logFormat)}
	}

	if *maxMessages < 0 {
		return usageError{fmt.Sprintf("--max-messages %d: want 0 (never) or more", *maxMessages)}
	}

	var listen *string
	if flagGiven(fs, "admin-listen") {
		addr, err := config.ParseAdminListen("--admin-listen", *adminListen)
		if err != nil {
			return usageError{err.Error()}
		}
		listen = &addr
	}
	cfg, db, err := sf.open()
	if err != nil {
		return err
	}
	defer db.Close()
	if listen != nil {
		cfg.AdminListen = *listen
	}
	lanes, err := cfg.Pick(*lane)
	if err != nil {
		return err
	}
	if flagGiven(fs, "max-messages") {
		lanes = append([]config.Lane(nil), lanes...)
		for i := range lanes {
			lanes[i].Worker.MaxMessages = *maxMessages
		}
	}
	err = config.Run(ctx, db, lanes, &config.RunOptions{Transports: e.transports(), Logger: log, AdminListen: cfg.AdminListen, StatusPage: cfg.StatusPage, Alerts: cfg.Alerts})
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// SIGTERM while starting (checking the schema, opening the
		// transports): nothing was claimed, so this is a clean stop, not
		// a failure for the supervisor to count.
		log.Info("stopped while starting", "reason", err)
		return nil
	}
	return err
}

// secondsAttr writes a duration of a JSON log line as seconds, a number,
// under its key with "_seconds" added ("for": 30s becomes "for_seconds":
// 30), as every duration of mailspool's JSON is; slog would write
// nanoseconds.
func secondsAttr(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.Float64(a.Key+"_seconds", a.Value.Duration().Seconds())
	}
	return a
}

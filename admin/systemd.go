package admin

import (
	"context"
	"log/slog"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// NotifyReady tells systemd (Type=notify) that the service is up. Without
// NOTIFY_SOCKET in the environment it does nothing.
func NotifyReady() error {
	_, err := daemon.SdNotify(false, daemon.SdNotifyReady)
	return err
}

// NotifyStopping tells systemd that the service is shutting down (draining
// sends in flight).
func NotifyStopping() error {
	_, err := daemon.SdNotify(false, daemon.SdNotifyStopping)
	return err
}

// Watchdog feeds systemd's watchdog (WatchdogSec=) until ctx ends, as long
// as h.Loops reports every claim loop turning: when one stalls it stops
// feeding, says why in the unit's status and asks systemd to act at once
// (WATCHDOG=trigger), so that a wedged worker is restarted. Without
// WATCHDOG_USEC for this process it returns at once.
func Watchdog(ctx context.Context, h *Health, log *slog.Logger) {
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		log.Warn("systemd watchdog settings unreadable", "err", err)
		return
	}
	if interval <= 0 {
		return
	}
	tick := time.NewTicker(interval / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := h.Loops(); err != nil {
			log.Error("worker wedged: asking systemd to restart it", "err", err)
			_, _ = daemon.SdNotify(false, "STATUS="+err.Error()+"\nWATCHDOG=trigger")
			return
		}
		if _, err := daemon.SdNotify(false, daemon.SdNotifyWatchdog); err != nil {
			log.Warn("feeding the systemd watchdog failed", "err", err)
		}
	}
}

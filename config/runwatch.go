package config

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/mailspool/mailspool/admin"
	"github.com/mailspool/mailspool/admin/statuspage"
	"github.com/mailspool/mailspool/alert"
	"github.com/mailspool/mailspool/inbound"
	"github.com/mailspool/mailspool/metrics"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/suppress"
	"github.com/mailspool/mailspool/transport/composite"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// watcher runs what watches Run's workers: the health check and the
// systemd notifications always (they do nothing outside systemd), the admin
// listener with its metrics when RunOptions.AdminListen is set, and the
// alerter when RunOptions.Alerts is.
type watcher struct {
	o       RunOptions
	health  *admin.Health
	reg     *prometheus.Registry
	metrics *metrics.Metrics
	alerter *alert.Alerter
	srv     *admin.Server
	queues  []*queue.Queue // for the status page
	db      *sql.DB        // the status page's suppressions and provider events

	stopBackground context.CancelFunc
	background     sync.WaitGroup
}

func newWatcher(db *sql.DB, lanes []Lane, o RunOptions) (*watcher, error) {
	var stall time.Duration
	for _, l := range lanes {
		stall = max(stall, l.Worker.ClaimInterval())
	}
	w := &watcher{o: o, db: db, health: admin.NewHealth(db, &admin.HealthOptions{Stall: stall})}
	if o.AdminListen != "" {
		w.reg = prometheus.NewRegistry()
		w.metrics = metrics.New(nil)
		w.reg.MustRegister(w.metrics, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if o.Alerts != nil {
		a, err := alert.New(db, alert.Options{WebhookURL: o.Alerts.WebhookURL, Slack: o.Alerts.Slack, Interval: o.Alerts.Interval, Logger: o.Logger})
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		w.alerter = a
	}
	return w, nil
}

// lane returns the observer for the worker of l, whose queue is q.
func (w *watcher) lane(q *queue.Queue, l Lane) (*queue.Observer, error) {
	w.queues = append(w.queues, q)
	obs := []*queue.Observer{w.health.Lane(l.Lane.Name)}
	if w.metrics != nil {
		m, err := w.metrics.Lane(q, l.Transport)
		if err != nil {
			return nil, fmt.Errorf("config: lane %s: %w", l.Lane.Name, err)
		}
		obs = append(obs, m)
	}
	if w.alerter != nil {
		t := l.Alerts
		t.Members = composite.IsComposite(l.Transport)
		if err := w.alerter.Lane(q, t); err != nil {
			return nil, fmt.Errorf("config: lane %s: %w", l.Lane.Name, err)
		}
	}
	return queue.JoinObservers(obs...), nil
}

// members adds the metrics of lane's composite transport.
func (w *watcher) members(lane string, tr *composite.Transport) error {
	if w.reg == nil {
		return nil
	}
	if err := w.reg.Register(metrics.NewMembers(lane, tr)); err != nil {
		return fmt.Errorf("config: lane %s: member metrics: %w", lane, err)
	}
	return nil
}

// start opens the admin listener (an address that cannot be bound is an
// error), starts the alerter and the systemd watchdog, and tells systemd
// the service is ready.
func (w *watcher) start(ctx context.Context) error {
	log := w.o.Logger
	if w.o.AdminListen != "" {
		handler, err := w.adminHandler()
		if err != nil {
			return err
		}
		srv, err := admin.Listen(w.o.AdminListen, handler)
		if err != nil {
			return fmt.Errorf("config: admin_listen: %w", err)
		}
		w.srv = srv
		log.Info("admin listener serving /metrics, /healthz and the status page at /", "addr", srv.Addr().String(),
			"actions", w.o.StatusPage.Actions, "credentials", !w.o.StatusPage.Credentials.IsZero())
		if !loopbackListen(w.o.AdminListen) {
			log.Warn("ADMIN LISTENER OFF LOOPBACK: /metrics and /healthz answer anyone who can reach this address, without credentials (only the status page asks for them); listen on 127.0.0.1 or firewall the port",
				"addr", srv.Addr().String())
		}
	}
	ctx, w.stopBackground = context.WithCancel(context.WithoutCancel(ctx))
	if w.alerter != nil {
		w.background.Go(func() { w.alerter.Run(ctx) })
	}
	w.background.Go(func() { admin.Watchdog(ctx, w.health, log) })
	if err := admin.NotifyReady(); err != nil {
		log.Warn("telling systemd the worker is ready failed", "err", err)
	}
	return nil
}

// loopbackListen reports whether addr (host:port) listens on loopback only;
// an empty host, 0.0.0.0 and [::] listen on every interface.
func loopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// adminHandler serves the admin endpoints and, at /, the status page of
// the lanes; it refuses a listener off loopback without credentials.
func (w *watcher) adminHandler() (http.Handler, error) {
	if err := statuspage.CheckListen(w.o.AdminListen, w.o.StatusPage.Credentials); err != nil {
		return nil, fmt.Errorf("config: admin_listen: %w", err)
	}
	so := w.o.StatusPage
	so.Logger = w.o.Logger
	var err error
	if so.Suppressions, err = suppress.Open(w.db); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if so.Events, err = inbound.OpenStore(w.db); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	page, err := statuspage.New(w.queues, &so)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	endpoints := admin.Handler(w.reg, w.health)
	mux := http.NewServeMux()
	mux.Handle("/metrics", endpoints)
	mux.Handle("/healthz", endpoints)
	mux.Handle("/", page)
	return mux, nil
}

// stopping tells systemd the workers are draining.
func (w *watcher) stopping() {
	if err := admin.NotifyStopping(); err != nil {
		w.o.Logger.Warn("telling systemd the worker is stopping failed", "err", err)
	}
}

// stop ends what start began; clean records a clean exit for the alerter
// (a recycle or a shutdown, not a failure).
func (w *watcher) stop(clean bool) {
	if w.stopBackground != nil {
		w.stopBackground()
		w.background.Wait()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if w.srv != nil {
		if err := w.srv.Shutdown(ctx); err != nil {
			w.o.Logger.Warn("stopping the admin listener", "err", err)
		}
	}
	if w.alerter != nil && clean {
		if err := w.alerter.Close(ctx); err != nil {
			w.o.Logger.Warn("recording the clean exit for alerts failed", "err", err)
		}
	}
}

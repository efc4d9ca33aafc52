// Package admin runs the operator side of a mailspool worker process: the
// admin HTTP listener (/metrics and /healthz), the Health check behind it,
// and the systemd notify protocol (READY, STOPPING, and a watchdog fed only
// while the claim loops turn).
//
// A worker process wires it up like this (cmd/mailspool does):
//
//	reg := prometheus.NewRegistry()
//	m := metrics.New(nil)
//	reg.MustRegister(m)
//	health := admin.NewHealth(db, nil)
//	obs, _ := m.Lane(q, transportURL)
//	opts.Observer = queue.JoinObservers(obs, health.Lane(q.Lane().Name))
//	srv, err := admin.Listen("127.0.0.1:9465", admin.Handler(reg, health))
//	admin.NotifyReady()
//	go admin.Watchdog(ctx, health, logger)
package admin

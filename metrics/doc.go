// Package metrics exports a mailspool worker's events and its lanes'
// tables as Prometheus metrics, with github.com/prometheus/client_golang.
// It adapts the queue.Observer; package queue itself depends on no metrics
// library.
//
//	m := metrics.New(nil)
//	registry.MustRegister(m)
//	obs, err := m.Lane(q, transportURL) // once per lane
//	opts.Observer = obs                 // queue.WorkerOptions
//
// Event counters and histograms count what this process's workers did;
// the row gauges (mailspool_queue_rows, mailspool_oldest_pending_age_seconds,
// mailspool_stuck_rows, ...) are read from the database on each scrape with
// the bounded queries of queue.Stats, so every process of a lane reports
// the same values for them.
//
// Labels are the lane name, the transport's URL scheme (smtp, smtps, ses,
// sendgrid, fake), the outcome kind and the row status: a handful of values
// each. No address, host, template or error text ever becomes a label.
// The full list of names is in docs/MONITORING.md.
package metrics

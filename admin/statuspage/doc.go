// Package statuspage is mailspool's status page: the queue at a glance in
// a browser. It is an http.Handler, server-rendered with html/template
// from embedded templates, that works with JavaScript disabled (the
// overview reloads itself with a meta refresh).
//
// The worker's admin listener serves it at / (config: admin_listen and
// [status_page]); an application can mount it itself, behind its own
// authentication, with StripPrefix:
//
//	page, err := statuspage.New([]*queue.Queue{transactional, marketing}, nil)
//	mux.Handle("/mail-status/", http.StripPrefix("/mail-status", requireStaff(page)))
//
// Pages:
//
//	GET /                          per lane: backlog, oldest due mail, sent and failed in the last hour,
//	                               failure rate, rows in sending, paused or breaker state, top failure rules
//	GET /failures                  the last 24 hours' failures of every lane, grouped by the rule that decided them
//	GET /lanes/{lane}/failures     the mails one rule failed (?rule=R&kind=K)
//	GET /lanes/{lane}/mail/{id}    one mail, as "mailspool show --full" prints it, bodies collapsed
//	GET /mail?lane=L&id=N          finds a mail by id
//
// The figures on the overview are read at most once per Options.CacheFor
// (default 5s) however many people look, and a browser left on the page
// never waits for them (see Options.CacheFor); each is a range of the
// (status, next_run) index, never a scan of the history.
//
// The page is read-only unless Options.Actions is set: every request
// other than GET or HEAD is answered 405. With Actions, a mail's page has
// retry and cancel buttons and the overview pause and resume buttons per
// lane; each is a POST form carrying a CSRF token, checked together with
// the browser's Sec-Fetch-Site/Origin headers (http.CrossOriginProtection),
// and each is logged with who did it.
//
// Recipient addresses are masked (j***@example.com), also where they
// appear in error texts, subjects, headers and bodies, unless
// Options.ShowAddresses is set.
//
// With Options.Credentials set, every request needs the bearer token or
// the basic user and password. CheckListen refuses a listener address
// that is not loopback when there are none.
//
// # Adding a section
//
// Each block of a lane's figures on the overview is a section (see
// sections in overview.go): a function that reads its figures for one
// lane, cached like the others, and a template named "section-NAME" in
// templates/sections.html. A new capability (suppressions by reason,
// throttle use, the members of a composite transport, the last provider
// event) adds its figures as one more entry there, without touching the
// others.
package statuspage

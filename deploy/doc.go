// Package deploy holds the systemd units that run the mailspool worker:
// mailspool-worker.service (every lane of the config in one process) and
// mailspool-worker@.service (one process per lane). It has no code; its
// tests check the units with systemd-analyze.
package deploy

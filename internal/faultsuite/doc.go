// Package faultsuite is the fault suite: it runs real "mailspool worker"
// processes against MariaDB, PostgreSQL or SQLite and an in-process SMTP server that
// counts deliveries by Message-ID, breaks something (SIGKILL, a database
// restart, a table lock, a slow provider, a poison message, ...), and checks
// that every mail ends in exactly one final state.
//
// The package holds only tests. They run when MAILSPOOL_FAULTS=1, serially:
//
//	MAILSPOOL_FAULTS=1 go test -count=1 -p 1 -v -timeout 30m ./internal/faultsuite/
//
// The scenario that restarts a database server starts a private mariadbd of
// its own; it runs under CI=true or with MAILSPOOL_FAULTS_RESTART=1. The
// Galera scenario starts a private 3-node cluster on loopback; it runs
// under CI=true or with MAILSPOOL_GALERA=1.
// docs/RELIABILITY.md describes each scenario and the figures measured.
package faultsuite

package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/mailspool/mailspool/transport"
)

// Limit allows N events per Per. The zero Limit means no limit; otherwise
// N must be positive and Per at least a second (Lane validation says so
// when they are not, instead of silently not limiting).
type Limit struct {
	N   int
	Per time.Duration
}

func (l Limit) off() bool { return l == Limit{} }

func (l Limit) check() error {
	switch {
	case l.off():
		return nil
	case l.N <= 0:
		return fmt.Errorf("limit %d per %v: N must be positive (the zero Limit means no limit)", l.N, l.Per)
	case l.Per < time.Second:
		return fmt.Errorf("limit %d per %v: Per must be at least 1s", l.N, l.Per)
	case l.Per > MaxLimitWindow:
		return fmt.Errorf("limit %d per %v: Per must be at most %v", l.N, l.Per, MaxLimitWindow)
	}
	return nil
}

// NoLimit is the zero Limit, spelt out: no limit.
var NoLimit = Limit{}

// The anti-abuse preset for sign-up, verification and password-reset mail,
// which anyone can trigger for any address: at most 3 mails per recipient
// per hour, and 20 per client IP per day (for enqueues that pass ClientIP).
// Lanes have no limits unless they are set:
//
//	queue.Lane{RecipientLimit: queue.SignupRecipientLimit, IPLimit: queue.SignupIPLimit}
var (
	SignupRecipientLimit = Limit{N: 3, Per: time.Hour}
	SignupIPLimit        = Limit{N: 20, Per: 24 * time.Hour}
)

// Lane is one independent stream of mail: its own table, limits and retry
// policy (and, in a worker, its own transport). Transactional and marketing
// mail belong in different lanes so a campaign can never delay a password
// reset.
type Lane struct {
	// Name identifies the lane in logs and metrics; defaults to Table.
	Name string
	// Table is the queue table; DefaultTable ("mail_queue") when empty. The
	// rate-limit counters live in Table + "_limits".
	Table string
	// RecipientLimit bounds mails enqueued per recipient address; zero
	// means no limit. See SignupRecipientLimit.
	RecipientLimit Limit
	// IPLimit bounds mails enqueued per client IP, for enqueues that pass
	// ClientIP; zero means no limit. See SignupIPLimit.
	IPLimit Limit
	// MaxSize bounds the message's encoded size in bytes, attachments
	// included (transport.Message.EncodedSize): a mail over it is refused
	// at enqueue with a *TooLargeError. Default 1 MiB; package config
	// defaults it from the lane's transport (Amazon SES 40 MB, SendGrid
	// 30 MB, SMTP transport.MaxEncodedSize, the server's SIZE being
	// checked at each send).
	MaxSize int
	// Retry is the retry policy; zero fields take the defaults.
	Retry RetryPolicy
	// LockTimeout bounds how long an enqueue waits for a lock on the queue
	// tables on MySQL/MariaDB (another session's LOCK TABLES, a schema
	// change, a row lock) before it fails with nothing written; whole
	// seconds, default DefaultLockTimeout. SQLite waits its busy timeout.
	LockTimeout time.Duration
	// Screen, when not nil, connects the lane to a suppression list
	// (package suppress): checked at enqueue and at each claim, and told
	// of permanent failures.
	Screen *Screen
	// Throttle, when not nil, connects the lane to send limits shared by
	// every worker (package throttle): checked at each claim and before
	// each send.
	Throttle *Throttle
	// ReturnPath, when not nil, returns the envelope sender of mail id,
	// set as transport.Message.ReturnPath at each send: a VERP address
	// (package verp) that links the bounces to the mail.
	ReturnPath func(id int64) string
}

// DefaultMaxSize is the default Lane.MaxSize.
const DefaultMaxSize = 1 << 20

// Queue is one lane's table on one database. It is safe for concurrent use.
type Queue struct {
	db    *sql.DB
	d     dialect
	lane  Lane
	clock Clock

	lockWait int // seconds an enqueue waits for a lock (MySQL/MariaDB)

	table  string // quoted
	limits string // quoted
	bodies string // quoted; SQLite only (schema version 8, see withBodies)
	files  string // quoted; attachments (schema version 10, see files.go)
	lanes  string // quoted lanesTable

	inserts inserts // the enqueue's statements
	wakers  wakers  // the workers of this Queue in this process, woken by its own enqueues

	// For SQLite: the database file and what it was when New opened it,
	// and this process's turn to write to it (see sqliteTurns).
	file      string
	fileInfo  os.FileInfo
	writeTurn chan struct{}
	// busyTimeout is the SQLite handle's: how long the queue's own
	// writes try for the write lock (beginSQLite).
	busyTimeout time.Duration
}

// Options configure a Queue beyond its Lane.
type Options struct {
	// Clock replaces the system clock (tests, the demo).
	Clock Clock
}

// DefaultLockTimeout is the default Lane.LockTimeout.
const DefaultLockTimeout = 5 * time.Second

// New returns the Queue for lane on db, which must be a MySQL/MariaDB
// (github.com/go-sql-driver/mysql), PostgreSQL (github.com/jackc/pgx/v5/stdlib)
// or SQLite (modernc.org/sqlite) handle. It does not create tables; run
// Migrate first. nil opts means defaults.
//
// An SQLite handle must have a busy timeout and begin its transactions
// IMMEDIATE, so that concurrent writers queue up instead of failing with
// SQLITE_BUSY; New returns an error saying how to open it otherwise.
// Package dburl opens it so: dburl.Open("sqlite:path/to/file.db").
//
// A PostgreSQL handle must bound its lock waits (lock_timeout), which
// stand in for the lane's LockTimeout there; dburl.Open("postgres://...")
// sets it to 5s.
func New(ctx context.Context, db *sql.DB, lane Lane, opts *Options) (*Queue, error) {
	if db == nil {
		return nil, errors.New("queue: New with a nil *sql.DB")
	}
	lane, err := lane.withDefaults()
	if err != nil {
		return nil, err
	}
	d, err := detectDialect(ctx, db)
	if err != nil {
		return nil, err
	}
	var busyTimeout time.Duration
	if d.sqlite {
		if busyTimeout, err = checkSQLite(ctx, db); err != nil {
			return nil, err
		}
	}
	if d.postgres {
		if err := checkPostgres(ctx, db); err != nil {
			return nil, err
		}
	}
	q := &Queue{db: db, d: d, lane: lane, clock: systemClock{}, busyTimeout: busyTimeout}
	if opts != nil && opts.Clock != nil {
		q.clock = opts.Clock
	}
	q.lockWait = int(lane.LockTimeout / time.Second)
	q.table = d.quote(lane.Table)
	q.limits = d.quote(lane.Table + "_limits")
	q.bodies = d.quote(lane.Table + "_bodies")
	q.files = d.quote(lane.Table + "_files")
	q.lanes = d.quote(lanesTable)
	if d.sqlite {
		if err := db.QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&q.file); err != nil {
			return nil, fmt.Errorf("queue: finding the SQLite file: %w", err)
		}
		if q.file != "" {
			if q.fileInfo, err = os.Stat(q.file); err != nil {
				return nil, fmt.Errorf("queue: the SQLite file: %w", err)
			}
			turn, _ := sqliteTurns.LoadOrStore(q.file, make(chan struct{}, 1))
			q.writeTurn = turn.(chan struct{})
		}
	}
	q.prepareInserts(ctx)
	return q, nil
}

// Lane returns the lane with its defaults filled in: metrics and alerts
// name it by Lane().Name.
func (q *Queue) Lane() Lane { return q.lane }

func (l Lane) withDefaults() (Lane, error) {
	if l.Table == "" {
		l.Table = DefaultTable
	}
	if err := validTable(l.Table); err != nil {
		return l, err
	}
	if l.Name == "" {
		l.Name = l.Table
	}
	if err := l.RecipientLimit.check(); err != nil {
		return l, fmt.Errorf("queue: lane %s: recipient %w", l.Name, err)
	}
	if err := l.IPLimit.check(); err != nil {
		return l, fmt.Errorf("queue: lane %s: client IP %w", l.Name, err)
	}
	if l.MaxSize == 0 {
		l.MaxSize = DefaultMaxSize
	}
	if l.LockTimeout == 0 {
		l.LockTimeout = DefaultLockTimeout
	}
	if l.LockTimeout < time.Second || l.LockTimeout > MaxLockTimeout || l.LockTimeout%time.Second != 0 {
		return l, fmt.Errorf("queue: lane %s: lock timeout %v is not a whole number of seconds from 1s to %v", l.Name, l.LockTimeout, MaxLockTimeout)
	}
	if l.MaxSize < 0 || l.MaxSize > transport.MaxEncodedSize {
		return l, fmt.Errorf("queue: lane %s: max size %d out of range 1..%d", l.Name, l.MaxSize, transport.MaxEncodedSize)
	}
	r, err := l.Retry.withDefaults()
	if err != nil {
		return l, fmt.Errorf("queue: lane %s: %w", l.Name, err)
	}
	l.Retry = r
	return l, nil
}

func (q *Queue) now() int64 { return q.clock.Now().UnixMilli() }

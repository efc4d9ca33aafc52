package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"
)

// Limit allows N events per Per. A zero Limit means no limit.
type Limit struct {
	N   int
	Per time.Duration
}

func (l Limit) off() bool { return l.N <= 0 || l.Per <= 0 }

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
	// RecipientLimit bounds mails enqueued per recipient address
	// (default 3 per hour). Set NoLimit to turn it off.
	RecipientLimit Limit
	// IPLimit bounds mails enqueued per client IP (default 20 per day), for
	// enqueues that pass ClientIP. Set NoLimit to turn it off.
	IPLimit Limit
	// MaxSize bounds Message.Size() in bytes (default 1 MiB, at most
	// transport.MaxMessageSize).
	MaxSize int
	// Retry is the retry policy; zero fields take the defaults.
	Retry RetryPolicy
}

// NoLimit turns a default limit off.
var NoLimit = Limit{N: -1}

// DefaultMaxSize is the default Lane.MaxSize.
const DefaultMaxSize = 1 << 20

// Queue is one lane's table on one database. It is safe for concurrent use.
type Queue struct {
	db    *sql.DB
	d     dialect
	lane  Lane
	clock Clock

	table  string // quoted
	limits string // quoted
	lanes  string // quoted lanesTable

	// For SQLite: the database file and what it was when New opened it.
	file     string
	fileInfo os.FileInfo
}

// Options configure a Queue beyond its Lane.
type Options struct {
	// Clock replaces the system clock (tests, the demo).
	Clock Clock
}

// New returns the Queue for lane on db, which must be a MySQL/MariaDB
// (github.com/go-sql-driver/mysql) or SQLite (modernc.org/sqlite) handle.
// It does not create tables; run Migrate first. nil opts means defaults.
//
// For SQLite, open the database with "_txlock=immediate" and a busy
// timeout (package dburl does), so that concurrent writers queue up instead
// of failing.
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
	q := &Queue{db: db, d: d, lane: lane, clock: systemClock{}}
	if opts != nil && opts.Clock != nil {
		q.clock = opts.Clock
	}
	q.table = d.quote(lane.Table)
	q.limits = d.quote(lane.Table + "_limits")
	q.lanes = d.quote(lanesTable)
	if d.sqlite {
		if err := db.QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&q.file); err != nil {
			return nil, fmt.Errorf("queue: finding the SQLite file: %w", err)
		}
		if q.file != "" {
			if q.fileInfo, err = os.Stat(q.file); err != nil {
				return nil, fmt.Errorf("queue: the SQLite file: %w", err)
			}
		}
	}
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
	if l.RecipientLimit == (Limit{}) {
		l.RecipientLimit = Limit{N: 3, Per: time.Hour}
	}
	if l.IPLimit == (Limit{}) {
		l.IPLimit = Limit{N: 20, Per: 24 * time.Hour}
	}
	if l.MaxSize == 0 {
		l.MaxSize = DefaultMaxSize
	}
	if l.MaxSize < 0 {
		return l, fmt.Errorf("queue: lane %s: negative max size %d", l.Name, l.MaxSize)
	}
	r, err := l.Retry.withDefaults()
	if err != nil {
		return l, fmt.Errorf("queue: lane %s: %w", l.Name, err)
	}
	l.Retry = r
	return l, nil
}

func (q *Queue) now() int64 { return q.clock.Now().UnixMilli() }

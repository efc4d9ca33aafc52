package throttle

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/mailspool/mailspool/internal/ddl"
	"github.com/mailspool/mailspool/internal/sqlstore"
)

// The tables, one pair per database, shared by every lane and worker.
const (
	// KeysTable holds one row per limit key: its GCRA theoretical arrival
	// time and its slow-down state.
	KeysTable = "mailspool_throttle"
	// SlotsTable holds the concurrency semaphore's leases.
	SlotsTable = "mailspool_throttle_slots"
)

// MaxKeyLen bounds a key's length in bytes.
const MaxKeyLen = 190

// dialect is the store behind the handle, where the SQL differs; its
// zero value is no store (package sqlstore detects it).
type dialect struct{ sqlstore.Name }

var (
	mysqlDialect    = dialect{sqlstore.MySQL}
	sqliteDialect   = dialect{sqlstore.SQLite}
	postgresDialect = dialect{sqlstore.Postgres}
)

// dialectOf tells the store behind db from its driver.
func dialectOf(db *sql.DB) (dialect, error) {
	n, err := sqlstore.Of(db)
	if err != nil {
		return dialect{}, fmt.Errorf("throttle: %w", err)
	}
	return dialect{n}, nil
}

// now is the database's clock in microseconds since the Unix epoch, read
// when the expression is evaluated: every limit is kept on it, never on a
// worker's clock. On MySQL/MariaDB SYSDATE (not NOW, which is the
// statement's start, before any lock wait); on PostgreSQL clock_timestamp
// (not now(), the transaction's start); SQLite's is the machine's, the
// one every process using the file shares.
func (d dialect) now() string {
	switch d {
	case mysqlDialect:
		return `CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED)`
	case postgresDialect:
		return `CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)`
	}
	return `CAST(unixepoch('subsec') * 1000000 AS INTEGER)`
}

func (d dialect) greatest() string {
	if d == sqliteDialect {
		return "MAX"
	}
	return "GREATEST"
}

// insertIgnore makes a key's row when it is missing.
func (d dialect) insertKey() string {
	switch d {
	case mysqlDialect:
		return `INSERT IGNORE INTO ` + KeysTable + ` (name) VALUES (?)`
	}
	return d.Rebind(`INSERT INTO ` + KeysTable + ` (name) VALUES (?) ON CONFLICT (name) DO NOTHING`)
}

// forUpdate ends a SELECT that locks the rows it reads for the
// transaction, and reads their latest committed version whatever the
// transaction's isolation level. SQLite has none: its transactions are
// IMMEDIATE and hold the file's write lock already.
func (d dialect) forUpdate() string {
	if d == sqliteDialect {
		return ""
	}
	return ` FOR UPDATE`
}

// lockKey locks a key's row for the transaction ("" on SQLite, where the
// transaction holds the file).
func (d dialect) lockKey() string {
	if d == sqliteDialect {
		return ""
	}
	return d.Rebind(`SELECT name FROM ` + KeysTable + ` WHERE name = ?` + d.forUpdate())
}

func (d dialect) createSQL() []string {
	switch d {
	case mysqlDialect:
		return []string{`CREATE TABLE IF NOT EXISTS ` + KeysTable + ` (
  name           VARCHAR(190) CHARACTER SET ascii NOT NULL COMMENT 'the limit key: domain:..., provider:..., lane:...',
  tat            BIGINT NOT NULL DEFAULT 0 COMMENT 'GCRA theoretical arrival time, unix us on the database clock',
  sched          BIGINT NOT NULL DEFAULT 0 COMMENT 'unix us: the turns up to here are promised to mails given back by claims',
  paused_until   BIGINT NOT NULL DEFAULT 0 COMMENT 'unix us: a Retry-After stops every send of the key until then',
  slow_factor    DOUBLE NOT NULL DEFAULT 1 COMMENT 'rate multiplier while slowed down (0 < f <= 1)',
  slow_until     BIGINT NOT NULL DEFAULT 0 COMMENT 'unix us: the slow-down holds until then',
  recover_until  BIGINT NOT NULL DEFAULT 0 COMMENT 'unix us: then the rate climbs back to 1 by this time',
  slow_reason    VARCHAR(255) NOT NULL DEFAULT '',
  slowdowns      BIGINT NOT NULL DEFAULT 0 COMMENT 'slow-downs so far',
  granted        BIGINT NOT NULL DEFAULT 0 COMMENT 'sends granted so far',
  refused        BIGINT NOT NULL DEFAULT 0 COMMENT 'sends refused (made to wait) so far',
  PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`, `CREATE TABLE IF NOT EXISTS ` + SlotsTable + ` (
  name    VARCHAR(190) CHARACTER SET ascii NOT NULL,
  holder  VARCHAR(190) CHARACTER SET ascii NOT NULL COMMENT 'the send holding the slots',
  n       INT NOT NULL DEFAULT 1,
  expires BIGINT NOT NULL COMMENT 'unix us on the database clock: the lease ends',
  PRIMARY KEY (name, holder)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`}
	}
	dbl := "DOUBLE PRECISION"
	if d == sqliteDialect {
		dbl = "REAL"
	}
	return []string{`CREATE TABLE IF NOT EXISTS ` + KeysTable + ` (
  name           VARCHAR(190) NOT NULL PRIMARY KEY,
  tat            BIGINT NOT NULL DEFAULT 0,
  sched          BIGINT NOT NULL DEFAULT 0,
  paused_until   BIGINT NOT NULL DEFAULT 0,
  slow_factor    ` + dbl + ` NOT NULL DEFAULT 1,
  slow_until     BIGINT NOT NULL DEFAULT 0,
  recover_until  BIGINT NOT NULL DEFAULT 0,
  slow_reason    VARCHAR(255) NOT NULL DEFAULT '',
  slowdowns      BIGINT NOT NULL DEFAULT 0,
  granted        BIGINT NOT NULL DEFAULT 0,
  refused        BIGINT NOT NULL DEFAULT 0
)`, `CREATE TABLE IF NOT EXISTS ` + SlotsTable + ` (
  name    VARCHAR(190) NOT NULL,
  holder  VARCHAR(190) NOT NULL,
  n       INTEGER NOT NULL DEFAULT 1,
  expires BIGINT NOT NULL,
  PRIMARY KEY (name, holder)
)`}
}

// The keys table's columns: those of its first version, and those added
// since (each BIGINT NOT NULL DEFAULT 0), in the order they came.
var (
	firstKeyColumns = []string{"name", "tat", "slow_factor", "slow_until", "recover_until", "slow_reason", "slowdowns", "granted", "refused"}
	addedKeyColumns = []string{"sched", "paused_until"}
)

// earlierKeysTable reports that a table of columns have (lower case) is
// the keys table of this or an earlier version: the first version's
// columns, some or all of those added since and no other. Any other table of that name is left
// for ddl.Create to refuse.
func earlierKeysTable(have []string) bool {
	for _, c := range firstKeyColumns {
		if !slices.Contains(have, c) {
			return false
		}
	}
	for _, c := range have {
		if !slices.Contains(firstKeyColumns, c) && !slices.Contains(addedKeyColumns, c) {
			return false
		}
	}
	return true
}

// Migrate creates the throttle tables if they are not there. It is
// idempotent; mailspool migrate runs it beside the queue's migrations.
func Migrate(ctx context.Context, db *sql.DB) error {
	d, err := dialectOf(db)
	if err != nil {
		return err
	}
	// sched and paused_until came after the first version of the table:
	// add the missing ones to a table of an earlier version first, so
	// that the table is mailspool's as Create checks it.
	have, err := ddl.TableColumns(ctx, db, d.Name, KeysTable)
	if err != nil {
		return fmt.Errorf("throttle: migrate: %w", err)
	}
	if earlierKeysTable(have) {
		for _, c := range addedKeyColumns {
			if slices.Contains(have, c) {
				continue
			}
			if _, err := db.ExecContext(ctx, `ALTER TABLE `+KeysTable+` ADD COLUMN `+c+` BIGINT NOT NULL DEFAULT 0`); err != nil {
				return fmt.Errorf("throttle: migrate: adding %s: %w", c, err)
			}
		}
	}
	// Refused before any DDL if a table of these names is not
	// mailspool's; one transaction on PostgreSQL and SQLite.
	if err := ddl.Create(ctx, db, d.createSQL()); err != nil {
		return fmt.Errorf("throttle: migrate: %w", err)
	}
	return nil
}

// Schedule hands out the next n turns of l's rate after those already
// handed out, to mails a claim gives back: it returns how long until the
// first of them and the time between two. It takes nothing of the rate
// itself (the sends do, when they start); it only spreads the mails that
// wait, so that they come due at the pace the rate lets them out.
//
// It locks the key's row in q's transaction until that ends, before it
// reads how far the turns run: two claims at once hand out turns one
// after the other, never the same ones twice, and never behind those of a
// claim that is rolled back. A claim that schedules several keys should
// take them in one order (by key), as Acquire does.
func (s *Store) Schedule(ctx context.Context, q querier, l Limit, n int) (first, step time.Duration, err error) {
	if l.Rate.Off() || n <= 0 {
		return 0, 0, nil
	}
	var k keyState
	var sched int64
	stmt := s.d.Rebind(`SELECT tat, sched, paused_until, ` + s.d.now() + ` FROM ` + KeysTable + ` WHERE name = ?` + s.d.forUpdate())
	if err := q.QueryRowContext(ctx, stmt, l.Key).Scan(&k.tat, &sched, &k.pausedUntil, &k.now); err != nil {
		return 0, 0, fmt.Errorf("throttle: scheduling %s: %w", l.Key, err)
	}
	// At the configured pace even while slowed down: the mails come due
	// no slower than the rate may climb back, and a turn they find taken
	// sends them to the end of the schedule again.
	iv := l.Rate.interval()
	from := max(sched, k.tat, k.pausedUntil, k.now)
	end := from + int64(math.Ceil(float64(n)*iv))
	if _, err := q.ExecContext(ctx, s.d.Rebind(`UPDATE `+KeysTable+` SET sched = `+s.d.greatest()+`(sched, ?) WHERE name = ?`), end, l.Key); err != nil {
		return 0, 0, fmt.Errorf("throttle: scheduling %s: %w", l.Key, err)
	}
	return time.Duration(from-k.now) * time.Microsecond, time.Duration(iv) * time.Microsecond, nil
}

// SchemaSQL is the DDL Migrate runs on a store ("mysql", "sqlite",
// "postgres"), for a schema tool of the operator's own.
func SchemaSQL(store string) ([]string, error) {
	switch store {
	case "mysql":
		return mysqlDialect.createSQL(), nil
	case "sqlite":
		return sqliteDialect.createSQL(), nil
	case "postgres":
		return postgresDialect.createSQL(), nil
	}
	return nil, fmt.Errorf("throttle: unknown store %q (want mysql, sqlite or postgres)", store)
}

// Rate is a GCRA rate: N sends per Per, with up to Burst at once after a
// quiet spell (Burst 0 means 1). The zero Rate is no rate limit.
type Rate struct {
	N     int
	Per   time.Duration
	Burst int
}

// Off reports that r limits nothing.
func (r Rate) Off() bool { return r.N == 0 }

// interval is the time one send costs, in microseconds.
func (r Rate) interval() float64 {
	return float64(r.Per.Microseconds()) / float64(r.N)
}

func (r Rate) burst() int { return max(r.Burst, 1) }

// MaxLateness bounds how late a send may start after its turn and still
// keep the rate's schedule (the GCRA's delay-variation tolerance): a turn
// may be taken up to min(a quarter interval, MaxLateness) early, so that a
// sender woken a little late by a busy machine does not push every later
// turn back. Being under one interval, it never lets more than N + Burst
// sends start within any Per, and it leaves the rest of the interval for
// the time between a turn and the send's start.
const MaxLateness = 50 * time.Millisecond

// tolerance is how far ahead of now the schedule may run (µs): the burst
// and the lateness tolerance.
func (r Rate) tolerance(iv float64) float64 {
	return float64(r.burst())*iv + min(iv/4, float64(MaxLateness.Microseconds()))
}

func (r Rate) String() string {
	if r.Off() {
		return "unlimited"
	}
	return fmt.Sprintf("%d/%v burst %d", r.N, r.Per, r.burst())
}

// Limit is one key's limits: a rate and a concurrency (sends in flight at
// once; 0 is none).
type Limit struct {
	Key         string
	Rate        Rate
	Concurrency int
}

func (l Limit) check() error {
	switch {
	case l.Key == "" || len(l.Key) > MaxKeyLen:
		return fmt.Errorf("throttle: limit key %q: must be 1 to %d bytes", l.Key, MaxKeyLen)
	case l.Rate.N < 0 || (l.Rate.N > 0 && l.Rate.Per <= 0) || l.Rate.Burst < 0:
		return fmt.Errorf("throttle: limit %s: rate %d per %v burst %d: N, Per and Burst must be positive", l.Key, l.Rate.N, l.Rate.Per, l.Rate.Burst)
	case l.Concurrency < 0:
		return fmt.Errorf("throttle: limit %s: concurrency %d is negative", l.Key, l.Concurrency)
	}
	return nil
}

// Store keeps the limits' state in the queue's database.
type Store struct {
	db *sql.DB
	d  dialect
}

// Open returns the Store on db (run Migrate first).
func Open(db *sql.DB) (*Store, error) {
	d, err := dialectOf(db)
	if err != nil {
		return nil, err
	}
	return &Store{db: db, d: d}, nil
}

// Denied says why a send may not start now.
type Denied struct {
	Key    string
	Reason string        // "rate", "concurrency" or "paused" (a Retry-After)
	Wait   time.Duration // at least this long, on the database's clock
}

func (d *Denied) Error() string {
	if d.Reason == "paused" {
		return fmt.Sprintf("throttle: %s: paused by a Retry-After, wait %v", d.Key, d.Wait)
	}
	return fmt.Sprintf("throttle: %s: %s limit reached, wait %v", d.Key, d.Reason, d.Wait)
}

// keyState is a key's row as read.
type keyState struct {
	tat, slowUntil, recoverUntil, now int64
	factor                            float64
	// pausedUntil: a Retry-After lets no send of the key start before
	// then (Pause), whatever its rate and slots would allow.
	pausedUntil int64
}

// factorAt is the key's rate multiplier at now: its slow-down factor
// until slowUntil, then climbing linearly back to 1 by recoverUntil.
func (k keyState) factorAt(now int64) float64 {
	f := k.factor
	if f <= 0 || f >= 1 || now >= k.recoverUntil {
		return 1
	}
	if now <= k.slowUntil || k.recoverUntil <= k.slowUntil {
		return f
	}
	done := float64(now-k.slowUntil) / float64(k.recoverUntil-k.slowUntil)
	return f + (1-f)*done
}

// allowed is how many sends the rate lets start at now, and otherwise how
// long until one may (µs).
func (k keyState) allowed(r Rate) (n int, waitUS int64) {
	if r.Off() {
		return math.MaxInt32, 0
	}
	iv := r.interval() / k.factorAt(k.now)
	start := max(k.tat, k.now)
	room := float64(k.now) + r.tolerance(iv) - float64(start)
	if room >= iv {
		return int(room / iv), 0
	}
	return 0, int64(math.Ceil(iv - room))
}

// querier is a *sql.DB or *sql.Tx.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// read returns key's state (made when missing) and the database's clock.
func (s *Store) read(ctx context.Context, q querier, key string) (keyState, error) {
	var k keyState
	stmt := s.d.Rebind(`SELECT tat, slow_factor, slow_until, recover_until, paused_until, ` + s.d.now() + ` FROM ` + KeysTable + ` WHERE name = ?`)
	err := q.QueryRowContext(ctx, stmt, key).Scan(&k.tat, &k.factor, &k.slowUntil, &k.recoverUntil, &k.pausedUntil, &k.now)
	if errors.Is(err, sql.ErrNoRows) {
		// Made in a statement of its own on MySQL and PostgreSQL: two
		// transactions that both made it would each hold the other's
		// duplicate-key lock and deadlock on the key's row lock. SQLite's
		// transaction already holds the file.
		mk := querier(s.db)
		if s.d == sqliteDialect {
			mk = q
		}
		if _, err := mk.ExecContext(ctx, s.d.insertKey(), key); err != nil {
			return k, fmt.Errorf("throttle: making key %s: %w", key, err)
		}
		err = q.QueryRowContext(ctx, stmt, key).Scan(&k.tat, &k.factor, &k.slowUntil, &k.recoverUntil, &k.pausedUntil, &k.now)
	}
	if err != nil {
		return k, fmt.Errorf("throttle: reading key %s: %w", key, err)
	}
	return k, nil
}

// take is the GCRA step: one conditional UPDATE that takes n sends of
// the key's rate, on the database's clock, when the rate allows them all
// (interval iv µs, with r's tolerance). It reports whether it did.
func (s *Store) take(ctx context.Context, q querier, key string, n int, iv float64, r Rate) (bool, error) {
	cost := int64(math.Ceil(float64(n) * iv))
	tol := int64(r.tolerance(iv))
	now, g := s.d.now(), s.d.greatest()
	stmt := s.d.Rebind(`UPDATE ` + KeysTable + ` SET tat = ` + g + `(tat, ` + now + `) + ?, granted = granted + ?
 WHERE name = ? AND ` + g + `(tat, ` + now + `) + ? <= ` + now + ` + ?`)
	res, err := q.ExecContext(ctx, stmt, cost, n, key, cost, tol)
	if err != nil {
		return false, fmt.Errorf("throttle: taking %d of %s: %w", n, key, err)
	}
	a, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("throttle: taking %d of %s: %w", n, key, err)
	}
	return a == 1, nil
}

// inFlight is how many slots of key are held by leases that have not
// expired; expired ones are deleted first.
func (s *Store) inFlight(ctx context.Context, q querier, key string) (int, error) {
	if _, err := q.ExecContext(ctx, s.d.Rebind(`DELETE FROM `+SlotsTable+` WHERE name = ? AND expires < `+s.d.now()), key); err != nil {
		return 0, fmt.Errorf("throttle: expiring the leases of %s: %w", key, err)
	}
	var n int
	if err := q.QueryRowContext(ctx, s.d.Rebind(`SELECT COALESCE(SUM(n), 0) FROM `+SlotsTable+` WHERE name = ?`), key).Scan(&n); err != nil {
		return 0, fmt.Errorf("throttle: counting the slots of %s: %w", key, err)
	}
	return n, nil
}

// txOptions: READ COMMITTED, so that the slot count read after the key's
// lock sees every lease committed before it (SQLite ignores it and is
// serializable).
func (s *Store) txOptions() *sql.TxOptions {
	if s.d == sqliteDialect {
		return nil
	}
	return &sql.TxOptions{Isolation: sql.LevelReadCommitted}
}

// ConcurrencyRetry is how long a send refused for concurrency is told to
// wait: a slot's release is not known in advance.
var ConcurrencyRetry = 200 * time.Millisecond

// Acquire takes, for holder, n sends of every limit's rate and n slots of
// its concurrency, leased until lease has passed on the database's
// clock, all in one transaction: all or nothing. A refusal is a *Denied
// saying which limit and how long to wait. Release gives the slots back;
// a holder that never does (its process was killed) loses them when the
// lease ends.
func (s *Store) Acquire(ctx context.Context, holder string, n int, lease time.Duration, limits []Limit) error {
	if n <= 0 || len(limits) == 0 {
		return nil
	}
	if holder == "" || len(holder) > MaxKeyLen {
		return fmt.Errorf("throttle: holder %q: must be 1 to %d bytes", holder, MaxKeyLen)
	}
	limits = slices.Clone(limits)
	slices.SortFunc(limits, func(a, b Limit) int { return strings.Compare(a.Key, b.Key) }) // one lock order: no deadlock
	for _, l := range limits {
		if err := l.check(); err != nil {
			return err
		}
	}
	tx, err := s.db.BeginTx(ctx, s.txOptions())
	if err != nil {
		return fmt.Errorf("throttle: acquire: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	var denied *Denied
	for _, l := range limits {
		if denied, err = s.acquireOne(ctx, tx, holder, n, lease, l); err != nil || denied != nil {
			break
		}
	}
	if err != nil {
		return err
	}
	if denied != nil {
		tx.Rollback() //nolint:errcheck // what was taken is given back
		if _, err := s.db.ExecContext(ctx, s.d.Rebind(`UPDATE `+KeysTable+` SET refused = refused + ? WHERE name = ?`), n, denied.Key); err != nil {
			return fmt.Errorf("throttle: counting a refusal: %w", err)
		}
		return denied
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("throttle: acquire: commit: %w", err)
	}
	return nil
}

func (s *Store) acquireOne(ctx context.Context, tx *sql.Tx, holder string, n int, lease time.Duration, l Limit) (*Denied, error) {
	if l.Rate.Off() && l.Concurrency == 0 {
		return nil, nil
	}
	k, err := s.read(ctx, tx, l.Key)
	if err != nil {
		return nil, err
	}
	if k.pausedUntil > k.now {
		return &Denied{Key: l.Key, Reason: "paused", Wait: time.Duration(k.pausedUntil-k.now) * time.Microsecond}, nil
	}
	if l.Concurrency > 0 || l.Rate.Off() {
		if lock := s.d.lockKey(); lock != "" {
			var name string
			if err := tx.QueryRowContext(ctx, lock, l.Key).Scan(&name); err != nil {
				return nil, fmt.Errorf("throttle: locking %s: %w", l.Key, err)
			}
		}
	}
	if !l.Rate.Off() {
		iv := l.Rate.interval() / k.factorAt(k.now)
		if ok, wait := k.allowed(l.Rate); ok < n {
			if wait == 0 {
				wait = int64(iv)
			}
			return &Denied{Key: l.Key, Reason: "rate", Wait: time.Duration(wait) * time.Microsecond}, nil
		}
		ok, err := s.take(ctx, tx, l.Key, n, iv, l.Rate)
		if err != nil {
			return nil, err
		}
		if !ok { // another sender took it between the read and the update
			return &Denied{Key: l.Key, Reason: "rate", Wait: time.Duration(iv) * time.Microsecond}, nil
		}
	}
	if l.Concurrency > 0 {
		used, err := s.inFlight(ctx, tx, l.Key)
		if err != nil {
			return nil, err
		}
		if used+n > l.Concurrency {
			return &Denied{Key: l.Key, Reason: "concurrency", Wait: ConcurrencyRetry}, nil
		}
		stmt := s.d.Rebind(`INSERT INTO ` + SlotsTable + ` (name, holder, n, expires) VALUES (?, ?, ?, ` + s.d.now() + ` + ?)`)
		if _, err := tx.ExecContext(ctx, stmt, l.Key, holder, n, lease.Microseconds()); err != nil {
			return nil, fmt.Errorf("throttle: leasing a slot of %s: %w", l.Key, err)
		}
	}
	return nil, nil
}

// Release gives back the slots holder took of keys.
func (s *Store) Release(ctx context.Context, holder string, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	args := []any{holder}
	for _, k := range keys {
		args = append(args, k)
	}
	stmt := s.d.Rebind(`DELETE FROM ` + SlotsTable + ` WHERE holder = ? AND name IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(keys)), ", ") + `)`)
	if _, err := s.db.ExecContext(ctx, stmt, args...); err != nil {
		return fmt.Errorf("throttle: releasing the slots of %s: %w", holder, err)
	}
	return nil
}

// Available says, without taking anything, how many sends limit l lets
// start now (a large number when it limits nothing), and when none, how
// long until one may. q may be the claim's transaction.
//
// ahead counts the sends the rate lets start within that long too: a
// sender given one waits for its turn (Policy.MaxHold).
func (s *Store) Available(ctx context.Context, q querier, l Limit, ahead time.Duration) (int, time.Duration, error) {
	k, err := s.read(ctx, q, l.Key)
	if err != nil {
		return 0, 0, err
	}
	k.now += ahead.Microseconds()
	if k.pausedUntil > k.now {
		return 0, time.Duration(k.pausedUntil-k.now) * time.Microsecond, nil
	}
	n := math.MaxInt32
	var wait time.Duration
	if !l.Rate.Off() {
		ok, w := k.allowed(l.Rate)
		n, wait = ok, time.Duration(w)*time.Microsecond
	}
	if l.Concurrency > 0 {
		var used int
		stmt := s.d.Rebind(`SELECT COALESCE(SUM(n), 0) FROM ` + SlotsTable + ` WHERE name = ? AND expires >= ` + s.d.now())
		if err := q.QueryRowContext(ctx, stmt, l.Key).Scan(&used); err != nil {
			return 0, 0, fmt.Errorf("throttle: counting the slots of %s: %w", l.Key, err)
		}
		if free := max(l.Concurrency-used, 0); free < n {
			n = free
			if n == 0 {
				wait = max(wait, ConcurrencyRetry)
			}
		}
	}
	return n, wait, nil
}

// Slow lowers key's rate to factor (0 < factor < 1) of its configured
// rate for hold, then lets it climb back linearly over recover. A key
// already slowed keeps the lower of the two factors and the later end:
// a burst of refusals does not compound to nothing.
func (s *Store) Slow(ctx context.Context, key string, factor float64, hold, recover time.Duration, reason string) error {
	if !(factor > 0 && factor < 1) {
		return fmt.Errorf("throttle: slow-down factor %v must be between 0 and 1", factor)
	}
	if hold < 0 || recover < 0 {
		return fmt.Errorf("throttle: slow-down hold %v and recovery %v must not be negative", hold, recover)
	}
	if _, err := s.read(ctx, s.db, key); err != nil {
		return err
	}
	now, g := s.d.now(), s.d.greatest()
	least := "LEAST"
	if s.d == sqliteDialect {
		least = "MIN"
	}
	stmt := s.d.Rebind(`UPDATE ` + KeysTable + ` SET
  slow_factor = CASE WHEN recover_until > ` + now + ` THEN ` + least + `(slow_factor, ?) ELSE ? END,
  slow_until = ` + g + `(slow_until, ` + now + ` + ?),
  recover_until = ` + g + `(recover_until, ` + now + ` + ?),
  slow_reason = ?, slowdowns = slowdowns + 1
 WHERE name = ?`)
	if len(reason) > 255 {
		reason = reason[:255]
	}
	_, err := s.db.ExecContext(ctx, stmt, factor, factor, hold.Microseconds(), (hold + recover).Microseconds(), reason, key)
	if err != nil {
		return fmt.Errorf("throttle: slowing %s down: %w", key, err)
	}
	return nil
}

// Pause lets no send of key start for d (a Retry-After): the key is
// paused until at least now + d. The pause is kept beside the rate's
// theoretical arrival time, not in it: neither the burst nor a slow-down
// shortens it, it stops a key without a rate too, and once it has passed
// the key lets out its burst again (the pause took no turn of the rate).
func (s *Store) Pause(ctx context.Context, key string, d time.Duration) error {
	if _, err := s.read(ctx, s.db, key); err != nil {
		return err
	}
	stmt := s.d.Rebind(`UPDATE ` + KeysTable + ` SET paused_until = ` + s.d.greatest() + `(paused_until, ` + s.d.now() + ` + ?) WHERE name = ?`)
	if _, err := s.db.ExecContext(ctx, stmt, d.Microseconds(), key); err != nil {
		return fmt.Errorf("throttle: pausing %s: %w", key, err)
	}
	return nil
}

// KeyStatus is a key's state, as stats shows it.
type KeyStatus struct {
	Key string `json:"key"`
	// Factor is the rate multiplier now (1: the configured rate).
	Factor     float64       `json:"factor"`
	SlowReason string        `json:"slow_reason,omitempty"`
	SlowUntil  time.Time     `json:"slow_until,omitzero"`   // the lowered rate holds until then
	Recovered  time.Time     `json:"recovered_at,omitzero"` // back to the configured rate then
	Ahead      time.Duration `json:"-"`                     // how far the rate's schedule, or a pause, runs ahead of now (the wait behind it); stats --json writes it in seconds
	InFlight   int           `json:"in_flight"`             // slots held by live leases
	// Scheduled is how far the turns promised to mails that claims gave
	// back run ahead of now: the mails waiting behind the limit, in time.
	Scheduled time.Duration `json:"-"`
	Slowdowns int64         `json:"slowdowns"`
	Granted   int64         `json:"granted"`
	Refused   int64         `json:"refused"`
}

// Status returns every key's state, by key.
func (s *Store) Status(ctx context.Context) ([]KeyStatus, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT k.name, k.tat, k.sched, k.paused_until, k.slow_factor, k.slow_until, k.recover_until, k.slow_reason, k.slowdowns, k.granted, k.refused, `+s.d.now()+`,
  (SELECT COALESCE(SUM(n), 0) FROM `+SlotsTable+` sl WHERE sl.name = k.name AND sl.expires >= `+s.d.now()+`)
 FROM `+KeysTable+` k ORDER BY k.name`)
	if err != nil {
		return nil, fmt.Errorf("throttle: status: %w", err)
	}
	defer rows.Close()
	var out []KeyStatus
	for rows.Next() {
		var ks KeyStatus
		var k keyState
		var sched int64
		if err := rows.Scan(&ks.Key, &k.tat, &sched, &k.pausedUntil, &k.factor, &k.slowUntil, &k.recoverUntil, &ks.SlowReason, &ks.Slowdowns, &ks.Granted, &ks.Refused, &k.now, &ks.InFlight); err != nil {
			return nil, fmt.Errorf("throttle: status: %w", err)
		}
		ks.Factor = k.factorAt(k.now)
		if ahead := max(k.tat, k.pausedUntil); ahead > k.now {
			ks.Ahead = time.Duration(ahead-k.now) * time.Microsecond
		}
		if sched > k.now {
			ks.Scheduled = time.Duration(sched-k.now) * time.Microsecond
		}
		if k.recoverUntil > k.now && k.factor < 1 {
			ks.SlowUntil = time.UnixMicro(k.slowUntil).UTC()
			ks.Recovered = time.UnixMicro(k.recoverUntil).UTC()
		} else {
			ks.SlowReason = ""
		}
		out = append(out, ks)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("throttle: status: %w", err)
	}
	return out, nil
}

// Now is the database's clock.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var us int64
	if err := s.db.QueryRowContext(ctx, `SELECT `+s.d.now()).Scan(&us); err != nil {
		return time.Time{}, fmt.Errorf("throttle: reading the database clock: %w", err)
	}
	return time.UnixMicro(us), nil
}

package composite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mailspool/mailspool/internal/ddl"
	"github.com/mailspool/mailspool/internal/sqlstore"
)

// State is what the health store knows of a member that is down.
type State struct {
	Member    string
	DownSince time.Time
	// NextProbe is when one send may try the member again.
	NextProbe time.Time
	// Reason is the error that took it down (no secrets: a transport
	// error's text).
	Reason string
}

// Health is where a lane's member health lives. Every process sending
// through the lane shares it, so that a member one worker sees fail is
// skipped by all of them, and one half-open probe brings it back.
type Health interface {
	// Down returns the members of lane that are down, by name. A change
	// made by another process shows within the store's refresh interval.
	Down(ctx context.Context, lane string) (map[string]State, error)
	// MarkDown takes a member down (keeping the first DownSince when it
	// already is) with its next probe at next. sent is when the failing
	// send began: a member brought back up (MarkUp) after that stays up,
	// since its failure may be older than its recovery (a slow send that
	// failed while another worker's probe succeeded). down reports
	// whether the member is down after the call: false when the report
	// was ignored so.
	MarkDown(ctx context.Context, lane, member, reason string, sent, next time.Time) (down bool, err error)
	// MarkUp brings a member back, as of at (when the send that showed it
	// works ended).
	MarkUp(ctx context.Context, lane, member string, at time.Time) error
	// ClaimProbe reports whether this caller takes the half-open probe of
	// a down member whose probe is due at now: true for one caller only,
	// across processes; the next probe is then due at next.
	ClaimProbe(ctx context.Context, lane, member string, now, next time.Time) (bool, error)
	// Pin records that a mail (by Message-ID) may have been delivered
	// through member, so that it is never sent through another one.
	Pin(ctx context.Context, lane, messageID, member string, now time.Time) error
	// Pinned returns the member a mail is pinned to, or "".
	Pinned(ctx context.Context, lane, messageID string) (string, error)
}

// Memory is a Health of one process, for tests and programs without a
// database. The zero value is ready to use.
type Memory struct {
	mu   sync.Mutex
	down map[string]State     // lane + "\x00" + member
	up   map[string]time.Time // when a member came back up, by the same key
	pins map[string]string
}

func (h *Memory) Down(_ context.Context, lane string) (map[string]State, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]State{}
	for k, s := range h.down {
		if l, _, _ := strings.Cut(k, "\x00"); l == lane {
			out[s.Member] = s
		}
	}
	return out, nil
}

func (h *Memory) MarkDown(_ context.Context, lane, member, reason string, sent, next time.Time) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down == nil {
		h.down = map[string]State{}
	}
	k := lane + "\x00" + member
	s, ok := h.down[k]
	if !ok {
		if h.up[k].After(sent) {
			return false, nil // it came back up after this send began
		}
		s = State{Member: member, DownSince: sent, NextProbe: next}
	}
	if next.After(s.NextProbe) {
		s.NextProbe = next
	}
	s.Reason = reason
	h.down[k] = s
	return true, nil
}

func (h *Memory) MarkUp(_ context.Context, lane, member string, at time.Time) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.up == nil {
		h.up = map[string]time.Time{}
	}
	k := lane + "\x00" + member
	delete(h.down, k)
	h.up[k] = at
	return nil
}

func (h *Memory) ClaimProbe(_ context.Context, lane, member string, now, next time.Time) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := lane + "\x00" + member
	s, ok := h.down[k]
	if !ok || s.NextProbe.After(now) {
		return false, nil
	}
	s.NextProbe = next
	h.down[k] = s
	return true, nil
}

func (h *Memory) Pin(_ context.Context, lane, messageID, member string, _ time.Time) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pins == nil {
		h.pins = map[string]string{}
	}
	h.pins[lane+"\x00"+messageID] = member
	return nil
}

func (h *Memory) Pinned(_ context.Context, lane, messageID string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pins[lane+"\x00"+messageID], nil
}

// Tables of the shared health, created by Migrate.
const (
	MembersTable = "mailspool_members"
	PinsTable    = "mailspool_member_pins"
)

// pinTTL is how long a pin is kept: longer than any retry schedule.
const pinTTL = 14 * 24 * time.Hour

// SQL is the Health shared through the queue's database (MySQL/MariaDB,
// PostgreSQL or SQLite): one row per lane member in mailspool_members
// (down since, next probe, reason), and the mails that may have been
// delivered through a member in mailspool_member_pins. Reads of the
// down members are cached for Refresh (default 500ms).
type SQL struct {
	db      *sql.DB
	store   sqlstore.Name
	Refresh time.Duration

	mu    sync.Mutex
	cache map[string]cached // by lane
}

type cached struct {
	at   time.Time
	down map[string]State
}

// NewSQL returns the health store on db, whose tables Migrate made.
func NewSQL(db *sql.DB) (*SQL, error) {
	store, err := sqlstore.Of(db)
	if err != nil {
		return nil, fmt.Errorf("composite: %w", err)
	}
	return &SQL{db: db, store: store, Refresh: 500 * time.Millisecond, cache: map[string]cached{}}, nil
}

// Migrate creates the health tables when they are missing.
func Migrate(ctx context.Context, db *sql.DB) error {
	store, err := sqlstore.Of(db)
	if err != nil {
		return fmt.Errorf("composite: %w", err)
	}
	stmts, err := SchemaSQL(string(store))
	if err != nil {
		return err
	}
	// Refused before any DDL if a table of these names is not
	// mailspool's; one transaction on PostgreSQL and SQLite.
	if err := ddl.Create(ctx, db, stmts); err != nil {
		return fmt.Errorf("composite: migrate: %w", err)
	}
	return nil
}

// SchemaSQL is the DDL Migrate runs on a store (mysql, sqlite, postgres).
func SchemaSQL(store string) ([]string, error) {
	switch store {
	case "mysql":
		return []string{
			`CREATE TABLE IF NOT EXISTS ` + MembersTable + ` (
  lane       VARCHAR(64) CHARACTER SET ascii NOT NULL,
  member     VARCHAR(191) NOT NULL,
  down_since BIGINT NOT NULL DEFAULT 0 COMMENT 'unix ms; 0 = up',
  next_probe BIGINT NOT NULL DEFAULT 0 COMMENT 'unix ms: when one send may try it again; while up, when it came up',
  reason     VARCHAR(512) NOT NULL DEFAULT '',
  PRIMARY KEY (lane, member)
) ENGINE=InnoDB`,
			`CREATE TABLE IF NOT EXISTS ` + PinsTable + ` (
  lane       VARCHAR(64) CHARACTER SET ascii NOT NULL,
  message_id VARCHAR(255) CHARACTER SET ascii NOT NULL,
  member     VARCHAR(191) NOT NULL,
  created_at BIGINT NOT NULL,
  PRIMARY KEY (lane, message_id),
  KEY idx_created (created_at)
) ENGINE=InnoDB`}, nil
	case "sqlite", "postgres":
		return []string{
			`CREATE TABLE IF NOT EXISTS ` + MembersTable + ` (
  lane       TEXT NOT NULL,
  member     TEXT NOT NULL,
  down_since BIGINT NOT NULL DEFAULT 0,
  next_probe BIGINT NOT NULL DEFAULT 0,
  reason     TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (lane, member)
)`,
			`CREATE TABLE IF NOT EXISTS ` + PinsTable + ` (
  lane       TEXT NOT NULL,
  message_id TEXT NOT NULL,
  member     TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  PRIMARY KEY (lane, message_id)
)`,
			`CREATE INDEX IF NOT EXISTS ` + PinsTable + `_idx_created ON ` + PinsTable + ` (created_at)`}, nil
	}
	return nil, fmt.Errorf("composite: unknown store %q (want mysql, sqlite or postgres)", store)
}

// q rewrites ? placeholders as $n for PostgreSQL.
func (h *SQL) q(s string) string {
	if h.store != sqlstore.Postgres {
		return s
	}
	var b strings.Builder
	n := 0
	for _, r := range s {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (h *SQL) Down(ctx context.Context, lane string) (map[string]State, error) {
	h.mu.Lock()
	c, ok := h.cache[lane]
	h.mu.Unlock()
	if ok && time.Since(c.at) < h.Refresh {
		return c.down, nil
	}
	rows, err := h.db.QueryContext(ctx, h.q(`SELECT member, down_since, next_probe, reason FROM `+MembersTable+` WHERE lane = ? AND down_since <> 0`), lane)
	if err != nil {
		return nil, fmt.Errorf("composite: reading member health: %w", err)
	}
	defer rows.Close()
	down := map[string]State{}
	for rows.Next() {
		var s State
		var since, next int64
		if err := rows.Scan(&s.Member, &since, &next, &s.Reason); err != nil {
			return nil, fmt.Errorf("composite: reading member health: %w", err)
		}
		s.DownSince, s.NextProbe = time.UnixMilli(since), time.UnixMilli(next)
		down[s.Member] = s
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("composite: reading member health: %w", err)
	}
	h.mu.Lock()
	h.cache[lane] = cached{at: time.Now(), down: down}
	h.mu.Unlock()
	return down, nil
}

// forget drops lane's cache, so that the next Down reads the table.
func (h *SQL) forget(lane string) {
	h.mu.Lock()
	delete(h.cache, lane)
	h.mu.Unlock()
}

// MarkDown is two statements, so that it can lose to a newer MarkUp on
// every store without relying on the order in which MySQL applies the
// assignments of an ON DUPLICATE KEY UPDATE (each sees the ones before
// it): the member's row is created down if it has none, then updated
// unless it came up after sent. An up row keeps in next_probe when it
// came up (Down and Members read next_probe only while down_since <> 0).
// When the update changed no row (ignored, or, on MySQL, nothing to
// change), a read of the row tells whether the member is down.
func (h *SQL) MarkDown(ctx context.Context, lane, member, reason string, sent, next time.Time) (bool, error) {
	defer h.forget(lane)
	reason = clip(reason, 512)
	var insert string
	switch h.store {
	case sqlstore.MySQL:
		insert = `INSERT INTO ` + MembersTable + ` (lane, member, down_since, next_probe, reason) VALUES (?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE lane = lane`
	default:
		insert = `INSERT INTO ` + MembersTable + ` (lane, member, down_since, next_probe, reason) VALUES (?, ?, ?, ?, ?) ON CONFLICT (lane, member) DO NOTHING`
	}
	if _, err := h.db.ExecContext(ctx, h.q(insert), lane, member, sent.UnixMilli(), next.UnixMilli(), reason); err != nil {
		return false, fmt.Errorf("composite: marking member %s down: %w", member, err)
	}
	// While down, the next probe only moves later: a report written late
	// (an SQLite write lock, a slow network) must not make a probe due
	// that a claim has just pushed back, which would let two probes run.
	// MySQL assigns left to right and each assignment sees the ones
	// before it, so down_since comes last; the WHERE sees the row as it
	// was.
	greatest := "GREATEST"
	if h.store == sqlstore.SQLite {
		greatest = "MAX"
	}
	update := `UPDATE ` + MembersTable + ` SET next_probe = CASE WHEN down_since = 0 THEN ? ELSE ` + greatest + `(next_probe, ?) END, reason = ?,
  down_since = CASE WHEN down_since = 0 THEN ? ELSE down_since END
WHERE lane = ? AND member = ? AND NOT (down_since = 0 AND next_probe > ?)`
	res, err := h.db.ExecContext(ctx, h.q(update), next.UnixMilli(), next.UnixMilli(), reason, sent.UnixMilli(), lane, member, sent.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("composite: marking member %s down: %w", member, err)
	}
	if n, err := res.RowsAffected(); err == nil && n > 0 {
		return true, nil
	}
	var since int64
	if err := h.db.QueryRowContext(ctx, h.q(`SELECT down_since FROM `+MembersTable+` WHERE lane = ? AND member = ?`), lane, member).Scan(&since); err != nil {
		return false, fmt.Errorf("composite: marking member %s down: reading it back: %w", member, err)
	}
	return since != 0, nil
}

func (h *SQL) MarkUp(ctx context.Context, lane, member string, at time.Time) error {
	defer h.forget(lane)
	if _, err := h.db.ExecContext(ctx, h.q(`UPDATE `+MembersTable+` SET down_since = 0, next_probe = ?, reason = '' WHERE lane = ? AND member = ?`), at.UnixMilli(), lane, member); err != nil {
		return fmt.Errorf("composite: marking member %s up: %w", member, err)
	}
	return nil
}

func (h *SQL) ClaimProbe(ctx context.Context, lane, member string, now, next time.Time) (bool, error) {
	defer h.forget(lane)
	res, err := h.db.ExecContext(ctx, h.q(`UPDATE `+MembersTable+` SET next_probe = ? WHERE lane = ? AND member = ? AND down_since <> 0 AND next_probe <= ?`), next.UnixMilli(), lane, member, now.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("composite: claiming the probe of member %s: %w", member, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("composite: claiming the probe of member %s: %w", member, err)
	}
	return n == 1, nil
}

func (h *SQL) Pin(ctx context.Context, lane, messageID, member string, now time.Time) error {
	if _, err := h.db.ExecContext(ctx, h.q(`DELETE FROM `+PinsTable+` WHERE created_at < ?`), now.Add(-pinTTL).UnixMilli()); err != nil {
		return fmt.Errorf("composite: pinning a mail to member %s: %w", member, err)
	}
	var stmt string
	switch h.store {
	case sqlstore.MySQL:
		stmt = `INSERT INTO ` + PinsTable + ` (lane, message_id, member, created_at) VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE member = member`
	default:
		stmt = `INSERT INTO ` + PinsTable + ` (lane, message_id, member, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (lane, message_id) DO NOTHING`
	}
	if _, err := h.db.ExecContext(ctx, h.q(stmt), lane, clip(messageID, 255), member, now.UnixMilli()); err != nil {
		return fmt.Errorf("composite: pinning a mail to member %s: %w", member, err)
	}
	return nil
}

func (h *SQL) Pinned(ctx context.Context, lane, messageID string) (string, error) {
	var member string
	err := h.db.QueryRowContext(ctx, h.q(`SELECT member FROM `+PinsTable+` WHERE lane = ? AND message_id = ?`), lane, clip(messageID, 255)).Scan(&member)
	switch {
	case err == sql.ErrNoRows:
		return "", nil
	case err != nil:
		return "", fmt.Errorf("composite: reading a mail's pin: %w", err)
	}
	return member, nil
}

// Members returns every member row of lane (up ones too), for stats.
func (h *SQL) Members(ctx context.Context, lane string) ([]State, error) {
	rows, err := h.db.QueryContext(ctx, h.q(`SELECT member, down_since, next_probe, reason FROM `+MembersTable+` WHERE lane = ? ORDER BY member`), lane)
	if err != nil {
		return nil, fmt.Errorf("composite: reading member health: %w", err)
	}
	defer rows.Close()
	var out []State
	for rows.Next() {
		var s State
		var since, next int64
		if err := rows.Scan(&s.Member, &since, &next, &s.Reason); err != nil {
			return nil, fmt.Errorf("composite: reading member health: %w", err)
		}
		if since != 0 {
			s.DownSince, s.NextProbe = time.UnixMilli(since), time.UnixMilli(next)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

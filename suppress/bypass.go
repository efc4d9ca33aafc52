package suppress

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/mailspool/mailspool/queue"
)

// BypassTable is the audit trail of mails enqueued past the list
// (queue.BypassSuppression), one row per mail, one table per database.
const BypassTable = "mailspool_suppression_bypasses"

// bypassSQL is the audit table's DDL, safe to run again.
func (d dialect) bypassSQL() []string {
	switch d {
	case mysqlDialect:
		return []string{`CREATE TABLE IF NOT EXISTS ` + BypassTable + ` (
  lane       VARCHAR(64) CHARACTER SET ascii NOT NULL,
  mail_id    BIGINT UNSIGNED NOT NULL,
  address    VARCHAR(254) NOT NULL,
  reason     VARCHAR(16) CHARACTER SET ascii NOT NULL DEFAULT '' COMMENT 'of the entry it went past at enqueue; empty: none',
  why        VARCHAR(255) NOT NULL COMMENT 'who and why, as given',
  created_at BIGINT NOT NULL COMMENT 'unix ms',
  PRIMARY KEY (lane, mail_id),
  KEY idx_created (created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`}
	default:
		return []string{`CREATE TABLE IF NOT EXISTS ` + BypassTable + ` (
  lane       VARCHAR(64) NOT NULL,
  mail_id    BIGINT NOT NULL,
  address    VARCHAR(254) NOT NULL,
  reason     VARCHAR(16) NOT NULL DEFAULT '',
  why        VARCHAR(255) NOT NULL,
  created_at BIGINT NOT NULL,
  PRIMARY KEY (lane, mail_id)
)`, `CREATE INDEX IF NOT EXISTS ` + BypassTable + `_idx_created ON ` + BypassTable + ` (created_at)`}
	}
}

// BypassRecord is one mail enqueued past the list.
type BypassRecord struct {
	Lane    string    `json:"lane"`
	MailID  int64     `json:"mail_id"`
	Address string    `json:"address"`
	Reason  Reason    `json:"reason,omitempty"` // of the entry it went past at enqueue; "" none
	Why     string    `json:"why"`
	At      time.Time `json:"at"`
}

// recordBypass is queue.Screen.BypassFunc.
func (l *List) recordBypass(ctx context.Context, tx queue.DBTX, b queue.Bypass) error {
	reason := ""
	if b.Suppressed != nil {
		reason = b.Suppressed.Reason
	}
	_, err := tx.ExecContext(ctx, l.d.Rebind(`INSERT INTO `+BypassTable+` (lane, mail_id, address, reason, why, created_at) VALUES (?, ?, ?, ?, ?, ?)`),
		b.Lane, b.ID, b.Address, reason, b.Why, l.now().UnixMilli())
	return err
}

// bypassed returns which of lane's mail ids were enqueued past the list.
func (l *List) bypassed(ctx context.Context, tx queue.DBTX, lane string, ids []int64) (map[int64]bool, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rq, many := tx.(interface {
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	})
	if !many {
		out := map[int64]bool{}
		for _, id := range ids {
			var n int
			err := tx.QueryRowContext(ctx, l.d.Rebind(`SELECT COUNT(*) FROM `+BypassTable+` WHERE lane = ? AND mail_id = ?`), lane, id).Scan(&n)
			if err != nil {
				return nil, fmt.Errorf("suppress: reading bypasses: %w", err)
			}
			out[id] = n > 0
		}
		return out, nil
	}
	args := []any{lane}
	for _, id := range ids {
		args = append(args, id)
	}
	rows, err := rq.QueryContext(ctx, l.d.Rebind(`SELECT mail_id FROM `+BypassTable+` WHERE lane = ? AND mail_id IN (`+strings.Repeat("?,", len(ids)-1)+`?)`), args...)
	if err != nil {
		return nil, fmt.Errorf("suppress: reading bypasses: %w", err)
	}
	defer rows.Close()
	out := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out[id] = true
	}
	return out, rows.Err()
}

// Bypasses returns the audit trail, newest first: of lane ("" every lane),
// at most limit (0: 100).
func (l *List) Bypasses(ctx context.Context, lane string, limit int) ([]BypassRecord, error) {
	if limit <= 0 {
		limit = 100
	}
	q, args := `SELECT lane, mail_id, address, reason, why, created_at FROM `+BypassTable, []any{}
	if lane != "" {
		q, args = q+` WHERE lane = ?`, append(args, lane)
	}
	rows, err := l.db.QueryContext(ctx, l.d.Rebind(q+fmt.Sprintf(` ORDER BY created_at DESC, mail_id DESC LIMIT %d`, limit)), args...)
	if err != nil {
		return nil, fmt.Errorf("suppress: reading bypasses: %w", err)
	}
	defer rows.Close()
	out := []BypassRecord{}
	for rows.Next() {
		var b BypassRecord
		var reason string
		var at int64
		if err := rows.Scan(&b.Lane, &b.MailID, &b.Address, &reason, &b.Why, &at); err != nil {
			return nil, fmt.Errorf("suppress: reading bypasses: %w", err)
		}
		b.Reason, b.At = Reason(reason), time.UnixMilli(at).UTC()
		out = append(out, b)
	}
	return out, rows.Err()
}

package queue

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// RuleFailures counts the mails of a lane that one classification rule
// failed.
type RuleFailures struct {
	// Rule is the rule that decided the last failure (Row.LastRule); ""
	// for failures no rule decided: expired, poison and cancelled mail, or
	// mail that failed before rules were recorded. Kind tells those apart.
	Rule  string    `json:"rule"`
	Kind  string    `json:"kind"`
	Count int64     `json:"count"`
	Last  time.Time `json:"last"` // when the newest of them failed
}

// FailuresByRule counts the mail that failed since since, by the rule and
// kind that decided it, most first. Mail an operator cancelled counts
// under kind cancelled. It reads the range of the (status, next_run) index
// that since bounds, whatever the size of the older history.
func (q *Queue) FailuresByRule(ctx context.Context, since time.Time) ([]RuleFailures, error) {
	rows, err := q.db.QueryContext(ctx, q.d.bounded(`SELECT last_rule, last_kind, COUNT(*), MAX(next_run) FROM `+q.table+
		` WHERE status = ? AND next_run > ? GROUP BY last_rule, last_kind ORDER BY COUNT(*) DESC, MAX(next_run) DESC`),
		StatusFailed, since.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("queue: failures by rule: %w", err)
	}
	defer rows.Close()
	var out []RuleFailures
	for rows.Next() {
		var f RuleFailures
		var last int64
		if err := rows.Scan(&f.Rule, &f.Kind, &f.Count, &last); err != nil {
			return nil, fmt.Errorf("queue: failures by rule: %w", err)
		}
		f.Kind = strings.TrimSpace(f.Kind)
		f.Last = time.UnixMilli(last)
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queue: failures by rule: %w", err)
	}
	return out, nil
}

// FailedBy returns up to limit (1..MaxListLimit) mails that failed since
// since by rule and kind (as FailuresByRule names them), the most recently
// failed first, without their bodies. Like FailuresByRule it reads the
// index range that since bounds.
func (q *Queue) FailedBy(ctx context.Context, rule, kind string, since time.Time, limit int) ([]Row, error) {
	if limit < 1 || limit > MaxListLimit {
		return nil, fmt.Errorf("queue: limit %d out of range 1..%d", limit, MaxListLimit)
	}
	rows, err := q.db.QueryContext(ctx, q.d.bounded(`SELECT `+rowColumns+` FROM `+q.table+
		` WHERE status = ? AND next_run > ? AND last_rule = ? AND last_kind = ? ORDER BY next_run DESC LIMIT ?`),
		StatusFailed, since.UnixMilli(), rule, kind, limit)
	if err != nil {
		return nil, fmt.Errorf("queue: failed by rule %q: %w", rule, err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		r, err := scanRow(rows)
		if err != nil {
			return nil, fmt.Errorf("queue: failed by rule %q: %w", rule, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queue: failed by rule %q: %w", rule, err)
	}
	return out, nil
}

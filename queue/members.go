package queue

import (
	"context"
	"fmt"
	"time"
)

// SentByMember counts the lane's mails sent in the last hour by the
// member of its composite transport that sent them (Row.Member; "" for
// mail sent through a plain transport): each member's share. It reads a
// range of the (status, next_run) index.
func (q *Queue) SentByMember(ctx context.Context) (map[string]int64, error) {
	since := q.clock.Now().Add(-time.Hour).UnixMilli()
	rows, err := q.db.QueryContext(ctx, q.d.bounded(`SELECT member, COUNT(*) FROM `+q.table+` WHERE `+statusIs(StatusSent)+` AND next_run > ? GROUP BY member`), since)
	if err != nil {
		return nil, fmt.Errorf("queue: sent by member: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var m string
		var n int64
		if err := rows.Scan(&m, &n); err != nil {
			return nil, fmt.Errorf("queue: sent by member: %w", err)
		}
		out[m] = n
	}
	return out, rows.Err()
}

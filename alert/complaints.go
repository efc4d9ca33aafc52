package alert

import (
	"context"
	"fmt"
	"time"

	"github.com/mailspool/mailspool/inbound"
	"github.com/mailspool/mailspool/internal/placeholder"
)

// DefaultComplaintWindow is the default Thresholds.ComplaintWindow.
const DefaultComplaintWindow = 24 * time.Hour

// complaints is the complaint-rate observation of a lane: the complaints
// about the lane's own mail that its provider reported (package inbound)
// over the window, against the mail the lane sent in it. A complaint
// counts for the lane of the mail it is about, which mailspool serve finds
// by the provider's message id when the event arrives (inbound.Link): a
// newsletter lane's complaints never set off the alert of the password
// resets sent through the same provider account.
func (a *Alerter) complaints(ctx context.Context, l lane, now time.Time) (observation, error) {
	t := l.t
	since := now.Add(-t.ComplaintWindow)
	sent, err := l.q.SentSince(ctx, since)
	if err != nil {
		return observation{}, err
	}
	var complained int64
	if err := a.db.QueryRowContext(ctx, placeholder.For(a.db, `SELECT COUNT(*) FROM `+inbound.Table+` WHERE lane = ? AND type = ? AND received_at >= ?`),
		l.q.Lane().Name, inbound.Complained, since.UnixMilli()).Scan(&complained); err != nil {
		return observation{}, fmt.Errorf("alert: counting complaints: %w", err)
	}
	rate := 0.0
	if sent > 0 {
		rate = float64(complained) / float64(sent)
	}
	return observation{
		cond: "complaint_rate", active: sent >= t.MinAttempts && rate > t.ComplaintRate, value: rate, threshold: t.ComplaintRate,
		summary: fmt.Sprintf("complaint rate %.2f%% over the last %s, %d complaints about its mail (from %s) for %d mails sent (threshold %.2f%%; Gmail and Yahoo require under 0.3%%)",
			100*rate, t.ComplaintWindow, complained, t.ComplaintProvider, sent, 100*t.ComplaintRate),
	}, nil
}

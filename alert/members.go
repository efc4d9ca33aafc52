package alert

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mailspool/mailspool/transport/composite"
)

// members is the member_down condition of a lane whose transport is a
// composite: active while any member is down in the shared health.
func (a *Alerter) members(ctx context.Context, lane string) (observation, error) {
	h, err := composite.NewSQL(a.db)
	if err != nil {
		return observation{}, err
	}
	states, err := h.Members(ctx, lane)
	if err != nil {
		return observation{}, err
	}
	var down []string
	for _, s := range states {
		if !s.DownSince.IsZero() {
			down = append(down, fmt.Sprintf("%s down since %s (%s)", s.Member, s.DownSince.UTC().Format(time.RFC3339), s.Reason))
		}
	}
	o := observation{cond: "member_down", active: len(down) > 0, value: float64(len(down)), summary: "every member is up"}
	if len(down) > 0 {
		o.summary = strings.Join(down, "; ") + "; its mail goes to the other members (mailspool stats shows them)"
	}
	return o, nil
}

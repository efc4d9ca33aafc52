package config

import (
	"database/sql"
	"fmt"

	"github.com/mailspool/mailspool/internal/duration"
	"github.com/mailspool/mailspool/suppress"
)

// suppressionConfig is a lane's [lanes.NAME.suppression] table: its
// suppress.Policy.
//
//	[lanes.resets.suppression]
//	bypass      = true      # send even to suppressed addresses (password resets)
//	hard_bounce = "forever" # or "off", or a duration ("90d")
//	complaint   = "forever"
//	invalid     = "forever"
//	unsubscribe = "forever"
//	hold        = "6h"      # mail found suppressed at its claim waits, checked every 6h, instead of failing
type suppressionConfig struct {
	Bypass      bool   `toml:"bypass"`
	Hold        string `toml:"hold"`
	HardBounce  string `toml:"hard_bounce"`
	Complaint   string `toml:"complaint"`
	Invalid     string `toml:"invalid"`
	Unsubscribe string `toml:"unsubscribe"`
}

// buildPolicy reads a lane's suppression policy; nil is the default.
func buildPolicy(sc *suppressionConfig) (suppress.Policy, error) {
	var p suppress.Policy
	if sc == nil {
		return p, nil
	}
	p.Bypass = sc.Bypass
	if sc.Hold != "" && sc.Hold != "off" {
		d, err := duration.Positive(sc.Hold)
		if err != nil {
			return p, fmt.Errorf("hold: %q: want off or a positive duration (6h): %v", sc.Hold, err)
		}
		p.Hold = d
	}
	for _, f := range []struct {
		key   string
		value string
		dst   *int64
	}{
		{"hard_bounce", sc.HardBounce, (*int64)(&p.HardBounce)},
		{"complaint", sc.Complaint, (*int64)(&p.Complaint)},
		{"invalid", sc.Invalid, (*int64)(&p.Invalid)},
		{"unsubscribe", sc.Unsubscribe, (*int64)(&p.Unsubscribe)},
	} {
		d, err := suppress.ParseDuration(f.value)
		if err != nil {
			return p, fmt.Errorf("%s: %w", f.key, err)
		}
		*f.dst = int64(d)
	}
	return p, nil
}

// Screen connects each lane to the suppression list on db under its
// policy (Lane.Suppression), setting Lane.Lane.Screen: every lane checks
// the list at enqueue and at claim unless its policy bypasses it, and a
// bulk lane adds its unsubscribe headers and checks its lists' scopes. Run does
// it; a program that enqueues through config's lanes calls it once after
// Load. The suppression table must exist (mailspool migrate, or
// suppress.Migrate).
func Screen(db *sql.DB, lanes []Lane) error {
	list, err := suppress.Open(db)
	if err != nil {
		return err
	}
	names := make([]string, len(lanes))
	for i := range lanes {
		names[i] = lanes[i].Lane.Name
	}
	for i := range lanes {
		if err := screenLane(list, &lanes[i], names); err != nil {
			return err
		}
	}
	return nil
}

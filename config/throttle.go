package config

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mailspool/mailspool/internal/duration"
	"github.com/mailspool/mailspool/throttle"
	"github.com/mailspool/mailspool/transport/ses"
)

// throttleConfig is the [throttle] table: send limits every worker of
// every lane shares through the database (docs/THROTTLING.md).
//
//	[throttle]
//	lease = "2m"                 # a killed worker's slots come back after this
//	builtin_rules = true         # the built-in slow-down rules (default true)
//	builtin_receivers = true     # gmail, microsoft, yahoo groups, concurrency 20 (default false)
//
//	[throttle.domains.gmail]     # a group of recipient domains: one receiver
//	match       = ["gmail.com", "googlemail.com"]
//	rate        = "10/s"         # N/DURATION (10/s, 600/1m, 5/2s)
//	burst       = 1
//	concurrency = 3
//
//	[throttle.providers.ses-main] # lanes naming it share it
//	rate      = "14/s"           # or leave it out and set ses_quota
//	ses_quota = true             # MaxSendRate from SES GetAccount
//
//	[[throttle.rules]]           # operator slow-down rules, before the built-in ones
//	name = "acme-slow"
//	text = "slow down"
//	target = "domain"            # or "provider"
//	factor = 0.5
//	hold = "10m"
//	recover = "10m"
type throttleConfig struct {
	Lease        string                         `toml:"lease"`
	BuiltinRules *bool                          `toml:"builtin_rules"`
	Receivers    bool                           `toml:"builtin_receivers"`
	Domains      map[string]domainLimitConfig   `toml:"domains"`
	Providers    map[string]providerLimitConfig `toml:"providers"`
	Rules        []slowRuleConfig               `toml:"rules"`
}

type domainLimitConfig struct {
	Match       []string `toml:"match"`
	Rate        string   `toml:"rate"`
	Burst       int      `toml:"burst"`
	Concurrency int      `toml:"concurrency"`
}

type providerLimitConfig struct {
	Rate        string `toml:"rate"`
	Burst       int    `toml:"burst"`
	Concurrency int    `toml:"concurrency"`
	SESQuota    bool   `toml:"ses_quota"`
}

type slowRuleConfig struct {
	Name     string  `toml:"name"`
	Code     int     `toml:"code"`
	Enhanced string  `toml:"enhanced"`
	Text     string  `toml:"text"`
	Target   string  `toml:"target"`
	Factor   float64 `toml:"factor"`
	Hold     string  `toml:"hold"`
	Recover  string  `toml:"recover"`
	Pause    bool    `toml:"pause"`
}

// laneThrottleConfig is [lanes.NAME.throttle]: the lane's own limit (key
// lane:NAME), the provider it sends through, and domain groups of its own.
//
//	[lanes.bulk.throttle]
//	rate        = "50/s"
//	concurrency = 20
//	provider    = "ses-main"
//	[lanes.bulk.throttle.domains.gmail]   # this lane's own Gmail limit
//	match = ["gmail.com", "googlemail.com"]
//	rate  = "2/s"
type laneThrottleConfig struct {
	Rate        string                       `toml:"rate"`
	Burst       int                          `toml:"burst"`
	Concurrency int                          `toml:"concurrency"`
	Provider    string                       `toml:"provider"`
	Domains     map[string]domainLimitConfig `toml:"domains"`
}

// ParseRate reads "N/DURATION" ("10/s", "600/1m", "5/2s"; a bare unit
// means 1 of it) with a burst (0: 1).
func ParseRate(s string, burst int) (throttle.Rate, error) {
	if s == "" {
		if burst != 0 {
			return throttle.Rate{}, fmt.Errorf("burst %d without a rate", burst)
		}
		return throttle.Rate{}, nil
	}
	bad := fmt.Errorf("rate %q is not N/DURATION (e.g. 10/s, 600/1m)", s)
	n, per, ok := strings.Cut(s, "/")
	count, err := strconv.Atoi(strings.TrimSpace(n))
	if !ok || err != nil || count < 1 {
		return throttle.Rate{}, bad
	}
	per = strings.TrimSpace(per)
	if per != "" && !strings.ContainsAny(per[:1], "0123456789") {
		per = "1" + per
	}
	d, err := duration.Positive(per)
	if err != nil {
		return throttle.Rate{}, bad
	}
	if burst < 0 {
		return throttle.Rate{}, fmt.Errorf("burst %d is negative", burst)
	}
	if float64(d.Microseconds())/float64(count) < 1 {
		return throttle.Rate{}, fmt.Errorf("rate %q: more than one send per microsecond", s)
	}
	return throttle.Rate{N: count, Per: d, Burst: burst}, nil
}

func buildGroups(prefix, scope string, m map[string]domainLimitConfig) ([]throttle.Group, error) {
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
	var out []throttle.Group
	for _, name := range names {
		dc := m[name]
		key := prefix + "." + name
		r, err := ParseRate(dc.Rate, dc.Burst)
		if err != nil {
			return nil, fmt.Errorf("config: %s: %w", key, err)
		}
		if dc.Concurrency < 0 {
			return nil, fmt.Errorf("config: %s.concurrency: %d is negative", key, dc.Concurrency)
		}
		if r.Off() && dc.Concurrency == 0 {
			return nil, fmt.Errorf("config: %s: limits nothing: give rate or concurrency", key)
		}
		g := throttle.Group{Name: scope + name, Match: dc.Match, Rate: r, Concurrency: dc.Concurrency}
		if err := g.Check(); err != nil {
			return nil, fmt.Errorf("config: %s: %w", key, err)
		}
		out = append(out, g)
	}
	return out, nil
}

// loadThrottle reads [throttle] and each lane's [lanes.NAME.throttle]
// into the lanes' Throttle policies (without their Store: Throttle sets it).
func (cfg *Config) loadThrottle(fc *fileConfig) error {
	tc := fc.Throttle
	if tc == nil {
		tc = &throttleConfig{}
	}
	var lease time.Duration
	if tc.Lease != "" {
		var err error
		if lease, err = duration.Positive(tc.Lease); err != nil {
			return fmt.Errorf("config: throttle.lease: %w", err)
		}
	}
	groups, err := buildGroups("throttle.domains", "", tc.Domains)
	if err != nil {
		return err
	}
	if tc.Receivers {
		for _, g := range throttle.BuiltinGroups {
			if !slices.ContainsFunc(groups, func(o throttle.Group) bool { return o.Name == g.Name }) {
				groups = append(groups, g)
			}
		}
	}
	var rules []throttle.Rule
	for i, rc := range tc.Rules {
		key := fmt.Sprintf("throttle.rules[%d]", i)
		r := throttle.Rule{Name: "operator:" + rc.Name, Code: rc.Code, Enhanced: rc.Enhanced, Text: rc.Text, Target: rc.Target, Factor: rc.Factor, Pause: rc.Pause}
		if rc.Name == "" {
			return fmt.Errorf("config: %s: name missing", key)
		}
		if r.Hold, err = duration.Positive(rc.Hold); err != nil {
			return fmt.Errorf("config: %s.hold: %w", key, err)
		}
		if rc.Recover != "" {
			if r.Recover, err = duration.Parse(rc.Recover); err != nil {
				return fmt.Errorf("config: %s.recover: %w", key, err)
			}
		}
		if err := r.Check(); err != nil {
			return fmt.Errorf("config: %s: %w", key, err)
		}
		rules = append(rules, r)
	}
	if tc.BuiltinRules == nil || *tc.BuiltinRules {
		rules = append(rules, throttle.DefaultRules...)
	}
	if rules == nil {
		rules = []throttle.Rule{}
	}
	providers := map[string]throttle.Limit{}
	sesQuota := map[string]bool{}
	for name, pc := range tc.Providers {
		key := "throttle.providers." + name
		r, err := ParseRate(pc.Rate, pc.Burst)
		if err != nil {
			return fmt.Errorf("config: %s: %w", key, err)
		}
		if pc.Concurrency < 0 {
			return fmt.Errorf("config: %s.concurrency: %d is negative", key, pc.Concurrency)
		}
		if r.Off() && pc.Concurrency == 0 && !pc.SESQuota {
			return fmt.Errorf("config: %s: limits nothing: give rate, concurrency or ses_quota", key)
		}
		l := throttle.Limit{Key: "provider:" + name, Rate: r, Concurrency: pc.Concurrency}
		if len(l.Key) > throttle.MaxKeyLen {
			return fmt.Errorf("config: %s: name too long", key)
		}
		providers[name] = l
		sesQuota[name] = pc.SESQuota && r.Off()
	}
	used := map[string]bool{}
	for i := range cfg.Lanes {
		ls := &cfg.Lanes[i]
		name := ls.Lane.Name
		p := throttle.Policy{Lane: name, Lease: lease, Rules: rules}
		if p.Lease == 0 {
			p.Lease = max(throttle.DefaultLease, ls.Worker.SendTimeout+30*time.Second)
		}
		if lc := fc.Lanes[name].Throttle; lc != nil {
			key := "lanes." + name + ".throttle"
			r, err := ParseRate(lc.Rate, lc.Burst)
			if err != nil {
				return fmt.Errorf("config: %s: %w", key, err)
			}
			if lc.Concurrency < 0 {
				return fmt.Errorf("config: %s.concurrency: %d is negative", key, lc.Concurrency)
			}
			if !r.Off() || lc.Concurrency > 0 {
				p.Limits = append(p.Limits, throttle.Limit{Key: "lane:" + name, Rate: r, Concurrency: lc.Concurrency})
			}
			if lc.Provider != "" {
				pl, ok := providers[lc.Provider]
				if !ok {
					return fmt.Errorf("config: %s.provider: %q is not a [throttle.providers.NAME]", key, lc.Provider)
				}
				if sesQuota[lc.Provider] && !strings.HasPrefix(strings.ToLower(ls.Transport), "ses:") {
					return fmt.Errorf("config: %s.provider: %s takes its rate from SES (ses_quota) but the lane's transport is not ses://", key, lc.Provider)
				}
				used[lc.Provider] = true
				p.Limits = append(p.Limits, pl)
				if sesQuota[lc.Provider] {
					ls.sesQuota = append(ls.sesQuota, len(p.Limits)-1)
				}
			}
			own, err := buildGroups(key+".domains", name+".", lc.Domains)
			if err != nil {
				return err
			}
			p.Groups = append(p.Groups, own...)
		}
		p.Groups = append(p.Groups, groups...)
		ls.Throttle = p
	}
	for name := range providers {
		if !used[name] {
			return fmt.Errorf("config: throttle.providers.%s: no lane names it (lanes.NAME.throttle.provider)", name)
		}
	}
	return nil
}

// SESQuotaRate is the rate a provider limit takes from SES's MaxSendRate
// (mails per second; fractions kept as N per a longer period).
func SESQuotaRate(maxSendRate float64) (throttle.Rate, error) {
	if !(maxSendRate > 0) || math.IsInf(maxSendRate, 0) {
		return throttle.Rate{}, fmt.Errorf("SES reported MaxSendRate %v", maxSendRate)
	}
	if maxSendRate == math.Trunc(maxSendRate) {
		return throttle.Rate{N: int(maxSendRate), Per: time.Second, Burst: 1}, nil
	}
	return throttle.Rate{N: int(math.Round(maxSendRate * 1000)), Per: 1000 * time.Second, Burst: 1}, nil
}

// Throttle connects each lane to the send limits on db (Lane.Throttle),
// setting Lane.Lane.Throttle for the lanes that have any; a provider
// limit with ses_quota asks SES for the account's MaxSendRate first.
// Run does it. The throttle tables must exist (mailspool migrate, or
// throttle.Migrate). log and onSlow may be nil.
func Throttle(ctx context.Context, db *sql.DB, lanes []Lane, log *slog.Logger, onSlow func(throttle.SlowEvent)) error {
	var st *throttle.Store
	for i := range lanes {
		ls := &lanes[i]
		p := ls.Throttle
		if p.Empty() && len(ls.sesQuota) == 0 {
			continue
		}
		p.Limits = slices.Clone(p.Limits)
		for _, at := range ls.sesQuota {
			u, err := url.Parse(ls.Transport)
			if err != nil {
				return fmt.Errorf("config: lane %s: the transport URL does not parse", ls.Lane.Name)
			}
			q, err := ses.QuotaFromURL(ctx, u)
			if err != nil {
				return fmt.Errorf("config: lane %s: %s takes its rate from SES: %w (give it a rate instead if the credentials may not call GetAccount)", ls.Lane.Name, p.Limits[at].Key, err)
			}
			if p.Limits[at].Rate, err = SESQuotaRate(q.MaxSendRate); err != nil {
				return fmt.Errorf("config: lane %s: %s: %w", ls.Lane.Name, p.Limits[at].Key, err)
			}
		}
		if st == nil {
			var err error
			if st, err = throttle.Open(db); err != nil {
				return err
			}
		}
		p.Store, p.Log, p.OnSlow = st, log, onSlow
		th, err := p.Throttle()
		if err != nil {
			return fmt.Errorf("config: lane %s: %w", ls.Lane.Name, err)
		}
		ls.Throttle = p
		ls.Lane.Throttle = th
	}
	return nil
}

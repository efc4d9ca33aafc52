package throttle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mailspool/mailspool/mailaddr"
	"github.com/mailspool/mailspool/queue"
)

// Group is a set of recipient domains that share one limit: a receiver
// (gmail.com and googlemail.com are one Gmail).
type Group struct {
	// Name names the group's key ("domain:" + Name).
	Name string
	// Match lists the domains: exact ("gmail.com") or patterns with *
	// ("*.outlook.com" is every subdomain, "hotmail.*" every hotmail
	// domain), compared with the recipient's domain in lower case.
	Match []string
	Rate  Rate
	// Concurrency bounds the group's sends in flight at once; 0 is none.
	Concurrency int
}

// BuiltinGroups are the big receivers' domains, grouped by operator,
// with the concurrency Postfix allows one destination by default
// (default_destination_concurrency_limit = 20): none of them publishes a
// rate, so they have none (docs/THROTTLING.md). [throttle]
// builtin_receivers = true adds them after the operator's own groups,
// which override a group of the same name.
var BuiltinGroups = []Group{
	{Name: "gmail", Match: []string{"gmail.com", "googlemail.com"}, Concurrency: 20},
	{Name: "microsoft", Match: []string{"outlook.com", "outlook.*", "hotmail.com", "hotmail.*", "live.com", "live.*", "msn.com"}, Concurrency: 20},
	{Name: "yahoo", Match: []string{"yahoo.com", "yahoo.*", "ymail.com", "rocketmail.com", "aol.com", "aim.com"}, Concurrency: 20},
}

var groupName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// Check says what is wrong with g, if anything.
func (g Group) Check() error {
	if !groupName.MatchString(g.Name) {
		return fmt.Errorf("domain group %q: a name is 1 to 63 of a-z, 0-9, '.', '_', '-'", g.Name)
	}
	if len(g.Match) == 0 {
		return fmt.Errorf("domain group %s: no domain to match", g.Name)
	}
	for _, m := range g.Match {
		if m == "" || strings.ContainsAny(m, "@/ ") {
			return fmt.Errorf("domain group %s: %q is not a domain or pattern", g.Name, m)
		}
		if _, err := path.Match(strings.ToLower(m), "x"); err != nil {
			return fmt.Errorf("domain group %s: pattern %q: %v", g.Name, m, err)
		}
	}
	return Limit{Key: "domain:" + g.Name, Rate: g.Rate, Concurrency: g.Concurrency}.check()
}

func (g Group) matches(domain string) bool {
	for _, m := range g.Match {
		if ok, _ := path.Match(strings.ToLower(m), domain); ok {
			return true
		}
	}
	return false
}

// Policy is one lane's limits: what every mail of the lane takes (the
// lane's own and its provider's), what mail to a domain group takes, and
// the rules that slow a key down when a reply asks for it.
type Policy struct {
	Lane  string
	Store *Store
	// Limits apply to every mail of the lane (keys "lane:NAME",
	// "provider:NAME"): a provider's key shared by lanes that send
	// through the same account limits them together.
	Limits []Limit
	// Groups are the domain groups; a recipient takes the limit of the
	// first group whose Match fits its domain, or none.
	Groups []Group
	// Lease is how long a send's slots are held at most: a worker killed
	// mid-send loses them when it ends. Default DefaultLease; it should
	// exceed the lane's send timeout.
	Lease time.Duration
	// Rules slow a key down on the replies they match; nil: the
	// built-in DefaultRules. An empty, non-nil slice: none.
	Rules []Rule
	// Log receives a line for every slow-down (default slog.Default()).
	Log *slog.Logger
	// OnSlow, when not nil, is told of every slow-down (metrics).
	OnSlow func(SlowEvent)
	// MaxHold is how long one sender of this process may wait for its
	// turn under a limit before it gives its mail back (default
	// DefaultMaxHold; negative: never wait). Only one sender per key and
	// process waits at a time, so a limited domain holds at most one
	// worker slot besides its sends in flight; the others' mail is given
	// back at once. Without it a rate with a small burst loses the turns
	// that pass between two claims.
	MaxHold time.Duration

	waiting *waiters // made by Throttle
}

// waiters are the keys a sender of this process waits for.
type waiters struct {
	mu   sync.Mutex
	keys map[string]bool
}

// DefaultMaxHold is the default Policy.MaxHold.
const DefaultMaxHold = time.Second

// DefaultLease is the default Policy.Lease.
const DefaultLease = 2 * time.Minute

// SlowEvent is a slow-down a reply caused.
type SlowEvent struct {
	Lane, Key, Rule string
	Factor          float64
	Hold, Recover   time.Duration
	Pause           time.Duration // the provider's Retry-After, when the rule pauses
}

// Check says what is wrong with p, if anything.
func (p *Policy) Check() error {
	seen := map[string]bool{}
	for _, l := range p.Limits {
		if err := l.check(); err != nil {
			return err
		}
	}
	for _, g := range p.Groups {
		if err := g.Check(); err != nil {
			return err
		}
		if seen[g.Name] {
			return fmt.Errorf("domain group %s given twice", g.Name)
		}
		seen[g.Name] = true
	}
	for _, r := range p.Rules {
		if err := r.Check(); err != nil {
			return err
		}
	}
	if p.Lease < 0 {
		return fmt.Errorf("throttle: lease %v is negative", p.Lease)
	}
	return nil
}

// Empty reports that p limits nothing.
func (p *Policy) Empty() bool {
	for _, l := range p.Limits {
		if !l.Rate.Off() || l.Concurrency > 0 {
			return false
		}
	}
	return len(p.Groups) == 0
}

// groupOf returns the limit of the group addr's domain belongs to.
func (p *Policy) groupOf(addr string) (Limit, bool) {
	at := strings.LastIndexByte(addr, '@')
	if at < 0 || len(p.Groups) == 0 {
		return Limit{}, false
	}
	domain := strings.ToLower(strings.TrimSuffix(addr[at+1:], "."))
	if d, err := mailaddr.Domain(domain); err == nil {
		domain = d
	}
	for _, g := range p.Groups {
		if g.matches(domain) {
			return Limit{Key: "domain:" + g.Name, Rate: g.Rate, Concurrency: g.Concurrency}, true
		}
	}
	return Limit{}, false
}

// limitsOf returns every limit a mail to addr takes.
func (p *Policy) limitsOf(addr string) []Limit {
	var out []Limit
	for _, l := range p.Limits {
		if !l.Rate.Off() || l.Concurrency > 0 {
			out = append(out, l)
		}
	}
	if g, ok := p.groupOf(addr); ok && (!g.Rate.Off() || g.Concurrency > 0) {
		out = append(out, g)
	}
	return out
}

// Throttle returns the queue.Throttle that applies p to its lane, nil
// when p limits nothing.
func (p *Policy) Throttle() (*queue.Throttle, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	if p.Empty() {
		return nil, nil
	}
	if p.Store == nil {
		return nil, errors.New("throttle: Policy without a Store")
	}
	p.waiting = &waiters{keys: map[string]bool{}}
	return &queue.Throttle{ScreenFunc: p.screen, AcquireFunc: p.acquire}, nil
}

// screen is queue.Throttle.ScreenFunc: of the claimed mails, as many as
// each key's budget lets start now go; the others wait, the k-th beyond
// the budget about k sends' time longer than the first, so that they come
// due spread out instead of all at once.
func (p *Policy) screen(ctx context.Context, tx queue.DBTX, addrs []string) ([]time.Duration, error) {
	type budget struct {
		limit Limit
		left  int
		wait  time.Duration
		step  time.Duration
		extra int
	}
	type excess struct {
		b   *budget
		idx int
	}
	budgets := map[string]*budget{}
	var order []*budget
	waits := make([]time.Duration, len(addrs))
	over := make([][]excess, len(addrs))
	for i, a := range addrs {
		limits := p.limitsOf(a)
		for _, l := range limits {
			if budgets[l.Key] != nil {
				continue
			}
			n, wait, err := p.Store.Available(ctx, tx, l, p.ahead(l))
			if err != nil {
				return nil, err
			}
			b := &budget{limit: l, left: n, wait: wait, step: ConcurrencyRetry}
			budgets[l.Key] = b
			order = append(order, b)
		}
		ok := true
		for _, l := range limits {
			if budgets[l.Key].left <= 0 {
				ok = false
			}
		}
		if ok {
			for _, l := range limits {
				budgets[l.Key].left--
			}
			continue
		}
		for _, l := range limits {
			if b := budgets[l.Key]; b.left <= 0 {
				over[i] = append(over[i], excess{b, b.extra})
				b.extra++
			}
		}
	}
	// The mails beyond a rate's budget are given the rate's next free
	// turns after those already handed out (Store.Schedule), so that they
	// come due one at a time, at the rate, instead of all together to be
	// given back again. Schedule locks each key until the claim ends: in
	// the order of their keys, as Acquire takes them, so that two claims
	// never wait for each other's.
	slices.SortFunc(order, func(a, b *budget) int { return strings.Compare(a.limit.Key, b.limit.Key) })
	for _, b := range order {
		if b.extra == 0 || b.limit.Rate.Off() {
			continue
		}
		base, step, err := p.Store.Schedule(ctx, tx, b.limit, b.extra)
		if err != nil {
			return nil, err
		}
		b.wait, b.step = max(b.wait, base), step
	}
	for i, ex := range over {
		for _, e := range ex {
			waits[i] = max(waits[i], e.b.wait+time.Duration(e.idx)*e.b.step)
		}
		if len(ex) > 0 {
			waits[i] = max(waits[i], time.Millisecond)
		}
	}
	return waits, nil
}

// acquire is queue.Throttle.AcquireFunc.
func (p *Policy) acquire(ctx context.Context, s queue.ThrottledSend) (func(error), time.Duration, error) {
	limits := p.limitsOf(s.Address)
	if len(limits) == 0 {
		return nil, 0, nil
	}
	lease := p.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
	hold := p.MaxHold
	if hold == 0 {
		hold = DefaultMaxHold
	}
	deadline := time.Now().Add(hold)
	waitingFor := ""
	defer func() {
		if waitingFor != "" {
			p.waiting.mu.Lock()
			delete(p.waiting.keys, waitingFor)
			p.waiting.mu.Unlock()
		}
	}()
	for {
		err := p.Store.Acquire(ctx, s.Holder, 1, lease, limits)
		var d *Denied
		if errors.As(err, &d) {
			wait := max(d.Wait, time.Millisecond)
			if d.Reason == "concurrency" {
				wait = 20 * time.Millisecond // a slot frees when a send returns: look again soon
			}
			if time.Until(deadline) < wait || !p.waitFor(d.Key, &waitingFor) {
				return nil, max(d.Wait, time.Millisecond), nil
			}
			select {
			case <-ctx.Done():
				return nil, d.Wait, nil
			case <-time.After(wait):
			}
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		break
	}
	var slotted []string
	for _, l := range limits {
		if l.Concurrency > 0 {
			slotted = append(slotted, l.Key)
		}
	}
	release := func(sendErr error) {
		// The send's context may be ending; the release must still run.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := p.Store.Release(ctx, s.Holder, slotted); err != nil {
			p.log().Warn("giving back a send's slots failed; they return when the lease ends", "lane", p.Lane, "err", err, "lease", lease)
		}
		if sendErr != nil {
			p.react(ctx, limits, sendErr)
		}
	}
	return release, 0, nil
}

func (p *Policy) log() *slog.Logger {
	if p.Log != nil {
		return p.Log
	}
	return slog.Default()
}

// waitFor makes this sender the one of its process that waits for key
// (*held names the key it waits for already); false when another does.
func (p *Policy) waitFor(key string, held *string) bool {
	if *held == key {
		return true
	}
	w := p.waiting
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.keys[key] {
		return false
	}
	if *held != "" {
		delete(w.keys, *held)
	}
	w.keys[key] = true
	*held = key
	return true
}

// ahead is how far ahead the claim's screen counts a rate's turns: one
// send's time, within MaxHold, so that the sender that waits for the next
// turn has a mail when it comes.
func (p *Policy) ahead(l Limit) time.Duration {
	if l.Rate.Off() || p.MaxHold < 0 {
		return 0
	}
	hold := p.MaxHold
	if hold == 0 {
		hold = DefaultMaxHold
	}
	return min(time.Duration(l.Rate.interval())*time.Microsecond, hold)
}

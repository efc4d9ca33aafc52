package composite

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mailspool/mailspool/transport"
)

// Options configure a composite Transport.
type Options struct {
	// Lane names the lane in the health store (default "default").
	Lane string
	// Health is where member health is shared (default a Memory of this
	// process only; a worker uses NewSQL on the queue's database).
	Health Health
	// Logger receives a line when a member goes down or comes back
	// (default slog.Default()).
	Logger *slog.Logger
	// OnDown, when set, is called when a send takes a member down, with
	// the error that did: an alert hook.
	OnDown func(member string, err error)
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Transport sends each mail through one member of a composite, chosen by
// its policy and the members' shared health, and routes by outcome (see
// docs/TRANSPORTS.md):
//
//   - Connection kind or lane scope: the member is marked down and the same
//     mail goes through the next member at once;
//   - sender scope: the member is marked down (OnDown alerts) and the mail
//     goes through the next member; no recipient is failed;
//   - maybe delivered: the error is returned, the mail is pinned to the
//     member and never sent through another one;
//   - anything else (Permanent about the recipient or the message,
//     Temporary): the error is the mail's outcome; no other member is
//     tried, and the retry goes to the same member while it is up.
type Transport struct {
	spec    Spec
	members []*member
	opts    Options
	closed  atomic.Bool
	once    sync.Once
}

type member struct {
	Member
	tr     transport.Transport
	sent   atomic.Int64
	failed atomic.Int64
	down   atomic.Bool // as last seen
}

// Open parses raw (see Parse) and opens each member with mux.
func Open(ctx context.Context, raw string, mux *transport.Mux, opts Options) (*Transport, error) {
	sp, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	trs := make([]transport.Transport, 0, len(sp.Members))
	for _, m := range sp.Members {
		if IsComposite(m.URL) {
			return nil, fmt.Errorf("composite: member %s is a composite", m.Name)
		}
		tr, err := mux.OpenTransport(ctx, m.URL)
		if err != nil {
			for _, t := range trs {
				t.Close()
			}
			return nil, fmt.Errorf("composite: member %s: %w", m.Name, err)
		}
		trs = append(trs, tr)
	}
	return New(sp, trs, opts)
}

// New makes a composite of already open members, one per sp.Members in
// order. Close closes them.
func New(sp Spec, members []transport.Transport, opts Options) (*Transport, error) {
	if len(members) != len(sp.Members) || len(members) == 0 {
		return nil, fmt.Errorf("composite: %d transports for %d members", len(members), len(sp.Members))
	}
	if opts.Lane == "" {
		opts.Lane = "default"
	}
	if opts.Health == nil {
		opts.Health = &Memory{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	t := &Transport{spec: sp, opts: opts}
	for i, m := range sp.Members {
		if m.Weight < 1 {
			m.Weight = 1
		}
		t.members = append(t.members, &member{Member: m, tr: members[i]})
	}
	return t, nil
}

// Spec returns the composite's parsed spec.
func (t *Transport) Spec() Spec { return t.spec }

// MemberError is the error of a send through a member: it names the
// member, and unwraps to the member's error (its Kind and Scope).
type MemberError struct {
	Member string
	Err    error
}

func (e *MemberError) Error() string { return "via " + e.Member + ": " + e.Err.Error() }
func (e *MemberError) Unwrap() error { return e.Err }

// SentVia is the member, for transport.MemberOf.
func (e *MemberError) SentVia() string { return e.Member }

// MemberOf returns the member named by the first *MemberError in err's
// chain, or "".
func MemberOf(err error) string {
	var me *MemberError
	if errors.As(err, &me) {
		return me.Member
	}
	return ""
}

// order is the order in which members are considered for m: as written
// for failover; for round-robin a weighted rendezvous hash of the
// Message-ID, so that a mail's retries prefer the same member and, over
// many mails, each member takes its weight's share.
func (t *Transport) order(m *transport.Message) []*member {
	if t.spec.Policy == Failover || len(t.members) == 1 {
		return t.members
	}
	type scored struct {
		m     *member
		score float64
	}
	s := make([]scored, len(t.members))
	for i, mem := range t.members {
		h := fnv.New64a()
		h.Write([]byte(mem.Name))
		h.Write([]byte{0})
		h.Write([]byte(m.MessageID))
		x := h.Sum64()
		// Finalize (splitmix64) so that neighbouring ids spread well.
		x ^= x >> 30
		x *= 0xbf58476d1ce4e5b9
		x ^= x >> 27
		x *= 0x94d049bb133111eb
		x ^= x >> 31
		u := (float64(x>>11) + 0.5) / (1 << 53) // in (0, 1)
		s[i] = scored{mem, -math.Log(u) / float64(mem.Weight)}
	}
	slices.SortStableFunc(s, func(a, b scored) int {
		switch {
		case a.score < b.score:
			return -1
		case a.score > b.score:
			return 1
		}
		return 0
	})
	out := make([]*member, len(s))
	for i, x := range s {
		out[i] = x.m
	}
	return out
}

// Send sends m through one member, or several when a member is down (see
// Transport).
func (t *Transport) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	if t.closed.Load() {
		return transport.Receipt{}, &transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane, Rule: "composite-closed", Detail: "composite transport closed", Err: transport.ErrClosed}
	}
	if err := ctx.Err(); err != nil {
		return transport.Receipt{}, &transport.Error{Kind: transport.Temporary, Rule: "composite-context", Detail: "not sent", Err: err}
	}
	lane := t.opts.Lane
	down, err := t.opts.Health.Down(ctx, lane)
	if err != nil {
		return transport.Receipt{}, &transport.Error{Kind: transport.Temporary, Rule: "composite-health", Detail: "cannot read member health", Err: err}
	}
	order := t.order(m)
	if transport.MaybeDeliveredBefore(ctx) && len(t.members) > 1 {
		pinned, err := t.opts.Health.Pinned(ctx, lane, m.MessageID)
		if err != nil {
			return transport.Receipt{}, &transport.Error{Kind: transport.Temporary, Rule: "composite-health", Detail: "cannot read which member may have the mail", Err: err}
		}
		if pinned != "" {
			order = slices.DeleteFunc(slices.Clone(order), func(x *member) bool { return x.Name != pinned })
			if len(order) == 0 {
				return transport.Receipt{}, &transport.Error{Kind: transport.Temporary, Rule: "composite-pinned", Detail: "the mail may have been delivered through member " + pinned + ", which this composite no longer has: not sent through another member"}
			}
		}
	}
	for _, x := range t.members {
		_, isDown := down[x.Name]
		x.down.Store(isDown)
	}
	pinned := len(order) == 1 && len(t.members) > 1 && transport.MaybeDeliveredBefore(ctx)
	var last error
	var skipped []string
	for _, mem := range order {
		if st, isDown := down[mem.Name]; isDown {
			now := t.opts.Now()
			if now.Before(st.NextProbe) {
				skipped = append(skipped, mem.Name)
				continue
			}
			won, err := t.opts.Health.ClaimProbe(ctx, lane, mem.Name, now, now.Add(t.spec.ProbeAfter))
			if err != nil || !won {
				skipped = append(skipped, mem.Name)
				continue
			}
			// This send is the member's half-open probe.
		}
		if ctx.Err() != nil {
			break
		}
		began := t.opts.Now()
		r, err := mem.tr.Send(ctx, m)
		if err == nil {
			mem.sent.Add(1)
			if _, wasDown := down[mem.Name]; wasDown {
				t.up(ctx, mem)
			}
			r.Member = mem.Name
			return r, nil
		}
		mem.failed.Add(1)
		err = &MemberError{Member: mem.Name, Err: err}
		kind, scope := transport.KindOf(err), transport.ScopeOf(err)
		var te *transport.Error
		maybe := errors.As(err, &te) && te.MaybeDelivered
		memberFault := kind == transport.Connection || scope == transport.ScopeLane || scope == transport.ScopeSender
		_, probe := down[mem.Name]
		// An answer about the recipient or the message, permanent or
		// temporary (450 4.2.1 mailbox busy), shows the member works.
		aboutMail := !maybe && kind != transport.Connection && (scope == transport.ScopeRecipient || scope == transport.ScopeMessage)
		switch {
		case memberFault && ctx.Err() == nil:
			t.markDown(ctx, mem, err, began)
		case probe && aboutMail:
			// The probe got an answer about the mail: the member works.
			t.up(ctx, mem)
		case probe && !maybe && ctx.Err() == nil:
			// A probe that got no answer about the mail leaves the member
			// down until its next probe; the mail goes on to the next.
			last = err
			continue
		}
		if maybe {
			if len(t.members) > 1 {
				if perr := t.opts.Health.Pin(ctx, lane, m.MessageID, mem.Name, t.opts.Now()); perr != nil {
					t.opts.Logger.Error("composite: cannot pin a maybe-delivered mail to its member", "lane", lane, "member", mem.Name, "err", perr)
				}
			}
			return transport.Receipt{}, err
		}
		if !memberFault || ctx.Err() != nil {
			return transport.Receipt{}, err
		}
		last = err
	}
	if last != nil {
		return transport.Receipt{}, last
	}
	if pinned {
		return transport.Receipt{}, &transport.Error{Kind: transport.Temporary, Rule: "composite-pinned", RetryAfter: t.spec.ProbeAfter,
			Detail: "the mail may have been delivered through member " + order[0].Name + ", which is down: it waits for that member rather than risk a duplicate through another"}
	}
	return transport.Receipt{}, &transport.Error{Kind: transport.Connection, Scope: transport.ScopeLane, Rule: "composite-all-down",
		Detail: "every member is down (" + strings.Join(skipped, ", ") + "); one send probes a member when its probe is due"}
}

// markDown records mem down after a send that began at began failed
// because of the member. The health store ignores it when another send
// brought the member up after began: the failure may be older than the
// recovery, and the member is not reported down (no warning, no OnDown:
// an alert would say a member is down that every worker sends through).
func (t *Transport) markDown(ctx context.Context, mem *member, err error, began time.Time) {
	now := t.opts.Now()
	// A failed probe keeps the member down until its next probe.
	down, herr := t.opts.Health.MarkDown(context.WithoutCancel(ctx), t.opts.Lane, mem.Name, err.Error(), began, now.Add(t.spec.ProbeAfter))
	switch {
	case herr != nil:
		// Not recorded: this process still stops sending through it.
		t.opts.Logger.Error("composite: cannot record a member down", "lane", t.opts.Lane, "member", mem.Name, "err", herr)
	case !down:
		t.opts.Logger.Info("composite: a member's failure is older than its recovery: it stays up", "lane", t.opts.Lane, "member", mem.Name, "err", err.Error())
		return
	}
	if !mem.down.Swap(true) {
		t.opts.Logger.Warn("composite: member down", "lane", t.opts.Lane, "member", mem.Name, "kind", transport.KindOf(err).String(), "scope", transport.ScopeOf(err).String(), "err", err.Error(), "probe_after", t.spec.ProbeAfter)
		if t.opts.OnDown != nil {
			t.opts.OnDown(mem.Name, err)
		}
	}
}

func (t *Transport) up(ctx context.Context, mem *member) {
	if err := t.opts.Health.MarkUp(context.WithoutCancel(ctx), t.opts.Lane, mem.Name, t.opts.Now()); err != nil {
		t.opts.Logger.Error("composite: cannot record a member up", "lane", t.opts.Lane, "member", mem.Name, "err", err)
		return
	}
	mem.down.Store(false)
	t.opts.Logger.Info("composite: member up again after a probe", "lane", t.opts.Lane, "member", mem.Name)
}

// MemberStats is one member as this process has seen it.
type MemberStats struct {
	Name   string `json:"name"`
	Weight int    `json:"weight"`
	Down   bool   `json:"down"`
	Sent   int64  `json:"sent"`
	Failed int64  `json:"failed"`
}

// Members returns each member's counters since Open, in the order written.
func (t *Transport) Members() []MemberStats {
	out := make([]MemberStats, len(t.members))
	for i, m := range t.members {
		out[i] = MemberStats{Name: m.Name, Weight: m.Weight, Down: m.down.Load(), Sent: m.sent.Load(), Failed: m.failed.Load()}
	}
	return out
}

// Close closes every member; it is idempotent.
func (t *Transport) Close() error {
	var errs []error
	t.once.Do(func() {
		t.closed.Store(true)
		for _, m := range t.members {
			if err := m.tr.Close(); err != nil {
				errs = append(errs, fmt.Errorf("member %s: %w", m.Name, err))
			}
		}
	})
	return errors.Join(errs...)
}

var _ transport.Transport = (*Transport)(nil)

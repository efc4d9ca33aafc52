package throttle

import (
	"context"
	"database/sql"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder is a transport that records when each send started and ended,
// by recipient domain.
type recorder struct {
	took  time.Duration
	reply func(m *transport.Message) error // nil: every send succeeds

	mu    sync.Mutex
	sends map[string][]span
}

type span struct{ start, end time.Time }

func (r *recorder) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	start := time.Now()
	time.Sleep(r.took)
	var err error
	if r.reply != nil {
		err = r.reply(m)
	}
	end := time.Now()
	domain := m.To.Address[strings.LastIndexByte(m.To.Address, '@')+1:]
	r.mu.Lock()
	if r.sends == nil {
		r.sends = map[string][]span{}
	}
	r.sends[domain] = append(r.sends[domain], span{start, end})
	r.mu.Unlock()
	return transport.Receipt{MessageID: "<x>"}, err
}

func (r *recorder) Close() error { return nil }

func (r *recorder) spans(domain string) []span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sends[domain])
}

// mostInFlight is the most spans open at one instant.
func mostInFlight(ss []span) int {
	type edge struct {
		t time.Time
		d int
	}
	var es []edge
	for _, s := range ss {
		es = append(es, edge{s.start, 1}, edge{s.end, -1})
	}
	slices.SortFunc(es, func(a, b edge) int {
		if c := a.t.Compare(b.t); c != 0 {
			return c
		}
		return a.d - b.d // an end before a start at the same instant
	})
	n, most := 0, 0
	for _, e := range es {
		n += e.d
		most = max(most, n)
	}
	return most
}

// mostStartsIn is the most spans started within any window of length w.
func mostStartsIn(ss []span, w time.Duration) int {
	starts := make([]time.Time, len(ss))
	for i, s := range ss {
		starts[i] = s.start
	}
	slices.SortFunc(starts, time.Time.Compare)
	most, j := 0, 0
	for i := range starts {
		for starts[i].Sub(starts[j]) >= w {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

type skewClock time.Duration

func (c skewClock) Now() time.Time                       { return time.Now().Add(time.Duration(c)) }
func (skewClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func countSent(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(fmt.Sprintf(`SELECT COUNT(*) FROM mail_queue WHERE status = %d`, queue.StatusSent)).Scan(&n))
	return n
}

// Two workers, each with its own database handle as a separate process
// would have, one with a clock 10 s ahead: the limited domain's sends
// never exceed its concurrency, never start faster than its rate allows
// (on the database's clock), and mail to the unlimited domain is not held
// behind it.
func TestWorkersShareLimits(t *testing.T) {
	forEachStoreWith(t, true, func(t *testing.T, s store) {
		ctx := context.Background()
		const perDomain = 30
		q, err := queue.New(ctx, s.db, queue.Lane{}, nil)
		require.NoError(t, err)
		for i := range perDomain {
			for _, d := range []string{"limited.example", "other.example"} {
				_, err := q.Enqueue(ctx, s.db, &transport.Message{From: mail.Address{Address: "app@sender.example"},
					To: mail.Address{Address: fmt.Sprintf("u%d@%s", i, d)}, Subject: "hi", Text: "hi"})
				require.NoError(t, err)
			}
		}
		group := Group{Name: "limited", Match: []string{"limited.example"}, Rate: Rate{N: 20, Per: time.Second, Burst: 1}, Concurrency: 2}
		rec := &recorder{took: 15 * time.Millisecond}
		runCtx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for w, skew := range []time.Duration{0, 10 * time.Second} {
			db, err := dburl.Open(s.url)
			require.NoError(t, err)
			defer db.Close()
			st := openStore(t, db)
			p := &Policy{Lane: "default", Store: st, Groups: []Group{group}}
			th, err := p.Throttle()
			require.NoError(t, err)
			wq, err := queue.New(ctx, db, queue.Lane{Throttle: th}, &queue.Options{Clock: skewClock(skew)})
			require.NoError(t, err)
			wk, err := queue.NewWorker(wq, rec, &queue.WorkerOptions{ID: fmt.Sprintf("w%d", w), Concurrency: 6, PollInterval: 50 * time.Millisecond})
			require.NoError(t, err)
			wg.Go(func() { assert.NoError(t, wk.Run(runCtx)) })
		}
		began := time.Now()
		last, idle := 0, 0
		for {
			n := countSent(t, s.db)
			if n == 2*perDomain {
				break
			}
			if n == last {
				idle++
			} else {
				idle = 0
			}
			require.Less(t, idle, 300, "no progress for 30 s: %d of %d sent", n, 2*perDomain)
			last = n
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("%d mails sent in %v", 2*perDomain, time.Since(began))
		stop()
		wg.Wait()

		limited, other := rec.spans("limited.example"), rec.spans("other.example")
		require.Len(t, limited, perDomain)
		require.Len(t, other, perDomain)
		assert.LessOrEqual(t, mostInFlight(limited), 2, "concurrency")
		// The rate grants at most (w + tolerance) / interval turns within
		// any w; a send starts after its turn, so the starts within w are
		// those turns plus the ones granted before w that had not started
		// yet, which hold a slot each (Concurrency). A busy machine only
		// delays starts, and these bounds hold however late they come; the
		// 2 ms are the store clock's granularity (SQLite's is 1 ms).
		iv := time.Duration(group.Rate.interval()) * time.Microsecond
		tol := time.Duration(group.Rate.tolerance(group.Rate.interval()))*time.Microsecond + 2*time.Millisecond
		assert.LessOrEqual(t, mostStartsIn(limited, time.Second), int((time.Second+tol)/iv)+group.Concurrency, "rate: 20/s burst 1")
		lastOther := slices.MaxFunc(other, func(a, b span) int { return a.end.Compare(b.end) })
		lastLimited := slices.MaxFunc(limited, func(a, b span) int { return a.start.Compare(b.start) })
		assert.True(t, lastOther.end.Before(lastLimited.start), "the unlimited domain waited behind the limited one")
		first := slices.MinFunc(limited, func(a, b span) int { return a.start.Compare(b.start) })
		assert.GreaterOrEqual(t, lastLimited.start.Sub(first.start), time.Duration(perDomain-group.Concurrency)*iv-tol, "faster than the rate")
	})
}

package queue

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// idleWorker runs a worker on q whose poll interval is an hour, and
// returns once its first claim found nothing: from then on only a wake
// makes it claim again.
func idleWorker(t *testing.T, q *Queue, tr *funcTransport) *Worker {
	t.Helper()
	var claims atomic.Int64
	w, err := NewWorker(q, tr, &WorkerOptions{PollInterval: time.Hour, CleanupInterval: -1, Logger: quietLogger(),
		Observer: &Observer{ClaimFunc: func(ClaimEvent) { claims.Add(1) }}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); assert.NoError(t, w.Run(ctx)) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	waitProgress(t, "the first claim", 20*time.Second, 1, func() int { return int(claims.Load()) })
	return w
}

// TestWakeEndsTheWait: an idle worker sends mail enqueued in the
// application's transaction when woken after the commit, and mail its own
// Queue enqueued in a transaction of its own without being told, instead
// of an hour later.
func TestWakeEndsTheWait(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
		tr := newFuncTransport(nil)
		w := idleWorker(t, q, tr)

		tx, err := s.db.BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = q.Enqueue(ctx, tx, testMessage("ann@example.com"))
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		w.Wake()
		waitProgress(t, "sent after Wake", 20*time.Second, 1, func() int { return int(tr.total.Load()) })

		_, err = q.Enqueue(ctx, s.db, testMessage("bob@example.com"))
		require.NoError(t, err)
		waitProgress(t, "sent after the queue's own enqueue", 20*time.Second, 2, func() int { return int(tr.total.Load()) })
		waitProgress(t, "recorded as sent", 20*time.Second, 2, func() int { return countRows(t, s.db, q.table, "status = 2") })
	})
}

// TestNotifyWakesWorkersElsewhere: on PostgreSQL an idle worker sends mail
// that another handle (another process, for all it knows) enqueued in its
// own transaction, woken by the notification sent at commit; when its
// listening connection is killed it listens again and goes on.
func TestNotifyWakesWorkersElsewhere(t *testing.T) {
	t.Parallel()
	s := newPostgresStore(t)
	ctx := context.Background()
	tr := newFuncTransport(nil)
	idleWorker(t, newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil), tr)

	app := s.open(t)
	producer := newQueue(t, app, Lane{RecipientLimit: NoLimit}, nil)
	enqueue := func(to string) {
		tx, err := app.BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = producer.Enqueue(ctx, tx, testMessage(to))
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
	}
	enqueue("ann@example.com")
	waitProgress(t, "sent after the notification", 20*time.Second, 1, func() int { return int(tr.total.Load()) })

	// Kill the listening connection, as a server restart or a network
	// cut would.
	var killed int
	require.NoError(t, app.QueryRowContext(ctx, `SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity
  WHERE datname = current_database() AND query LIKE 'LISTEN %'`).Scan(&killed))
	require.Equal(t, 1, killed)
	enqueue("bob@example.com")
	waitProgress(t, "sent after listening again", 20*time.Second, 2, func() int { return int(tr.total.Load()) })
}

// TestRestWait: after a claim that found a few rows of a trickle the wait
// is about the whole poll interval (with many workers, a short wait there
// cost CPU per mail); after a nearly full one it is
// short, but never under an eighth of the interval.
func TestRestWait(t *testing.T) {
	const poll = 800 * time.Millisecond
	w := &Worker{opts: WorkerOptions{PollInterval: poll}}
	for range 200 {
		for _, c := range []struct {
			n, limit int
			lo, hi   time.Duration
		}{
			{0, 200, poll * 3 / 4, poll * 5 / 4},
			{1, 200, poll * 3 / 4 * 199 / 200, poll * 5 / 4},
			{2, 32, poll * 3 / 4 * 30 / 32, poll * 5 / 4 * 30 / 32},
			{100, 200, poll * 3 / 8, poll * 5 / 8},
			{199, 200, poll / 8, poll / 4},
			{200, 200, poll / 8, poll / 4},
		} {
			if d := w.restWait(c.n, c.limit); d < c.lo || d > c.hi {
				t.Fatalf("restWait(%d, %d) = %v, want %v to %v", c.n, c.limit, d, c.lo, c.hi)
			}
		}
	}
}

// TestStandBack: a worker whose claim came back empty although a row was
// due stands back a step (up to maxStandBack, its polls twice as long per
// step); an empty claim that nothing announced moves it nowhere; claims
// that take rows bring it forward a step per stepForward of them, and a
// woken worker standing back that still finds late mail comes to the
// front at once.
func TestStandBack(t *testing.T) {
	const poll = 800 * time.Millisecond
	w := &Worker{q: &Queue{clock: systemClock{}, d: dialect{postgres: true}}, opts: WorkerOptions{PollInterval: poll}}
	now := func() int64 { return time.Now().UnixMilli() }

	w.standBack(0, false, false, time.Now(), 0)
	assert.Equal(t, 0, w.back, "an empty claim nothing announced")
	for want := 1; want <= maxStandBack+1; want++ {
		w.standBack(0, true, true, time.Now(), 0)
		assert.Equal(t, min(want, maxStandBack), w.back)
	}
	for range 100 {
		if d := w.pollWait(); d < poll<<maxStandBack*3/4 || d > poll<<maxStandBack*5/4 {
			t.Fatalf("pollWait standing back %d steps = %v", maxStandBack, d)
		}
	}
	for range stepForward - 1 {
		w.standBack(3, false, false, time.Now(), now())
	}
	assert.Equal(t, maxStandBack, w.back, "not yet")
	w.standBack(0, true, false, time.Now(), 0)
	for range stepForward - 1 {
		w.standBack(3, false, false, time.Now(), now())
	}
	assert.Equal(t, maxStandBack, w.back, "an empty claim between starts the count again")
	w.standBack(3, false, false, time.Now(), now())
	assert.Equal(t, maxStandBack-1, w.back, "one step forward")

	w.standBack(0, true, false, time.Now(), 0)
	w.standBack(2, true, true, time.Now(), now())
	assert.Equal(t, maxStandBack, w.back, "woken, found mail that had just come due: someone is in front")
	w.standBack(2, true, true, time.Now(), now()-w.wakeDelay().Milliseconds())
	assert.Equal(t, 0, w.back, "woken, found mail that had waited: nobody is in front")
	assert.False(t, w.unlisten.Load(), "in front: listening")

	for range maxStandBack {
		w.standBack(0, true, false, time.Now(), 0)
	}
	assert.True(t, w.unlisten.Load(), "standing back all the way: not listening")
	w.standBack(3, false, false, time.Now(), now()-(poll/2).Milliseconds())
	assert.Equal(t, maxStandBack, w.back, "mail that waited half an interval: someone is in front")
	w.standBack(3, false, false, time.Now(), now()-(poll*3/2).Milliseconds())
	assert.Equal(t, 0, w.back, "not listening, mail that waited longer than an interval: perhaps nobody listens")
	assert.False(t, w.unlisten.Load(), "back in front: listening again")

	// Where nobody listens (MySQL, SQLite), old mail is a backlog, not a
	// sign that the front is empty: the worker steps forward as before.
	w = &Worker{q: &Queue{clock: systemClock{}}, opts: WorkerOptions{PollInterval: poll}}
	for range maxStandBack {
		w.standBack(0, true, false, time.Now(), 0)
	}
	w.standBack(3, false, false, time.Now(), now()-(poll*3/2).Milliseconds())
	assert.Equal(t, maxStandBack, w.back, "a backlog's old mail")
	assert.False(t, w.unlisten.Load(), "nothing to stop listening to")
}

// TestShareLane: a claim after a timed wait whose rows had been due for
// less than a quarter of the poll interval (others claim the lane often)
// spreads the worker's waits out a quarter at a time, up to maxSpread
// intervals on average (2^maxStandBack with standing back counted in);
// rows that had waited more than half an interval draw it back in; a
// claim a wake started, or one that found nothing, changes nothing. A
// spread-out wait is never shorter than an unspread one, and still often
// about as short, so that workers that a stall brought into step do not
// all wait the spread out together.
func TestShareLane(t *testing.T) {
	const poll = 800 * time.Millisecond
	w := &Worker{q: &Queue{clock: systemClock{}}, opts: WorkerOptions{PollInterval: poll}}
	start := time.Now()
	at := func(waited time.Duration) int64 { return start.Add(-waited).UnixMilli() }
	// waits checks 2 000 poll waits: within [3/4, 5/4] of the base
	// (the interval, twice per step back) plus up to twice the spread
	// beyond one base, averaging spread × base, and, spread out, a
	// share of them no longer than an unspread wait can be.
	waits := func(spread float64) {
		t.Helper()
		base := poll << w.back
		lo, hi := base*3/4, base*5/4+time.Duration(2*(spread-1)*float64(base))
		var sum time.Duration
		short := 0
		for range 2000 {
			d := w.pollWait()
			if d < lo || d > hi {
				t.Fatalf("pollWait at spread %.2f, back %d = %v, want %v to %v", w.spread, w.back, d, lo, hi)
			}
			sum += d
			if d <= base*5/4 {
				short++
			}
		}
		mean := float64(sum/2000) / float64(base)
		assert.InDelta(t, spread, mean, spread/10, "mean wait at spread %.2f, back %d, in bases", w.spread, w.back)
		if spread > 1 {
			assert.Greater(t, short, 20, "waits no longer than unspread ones, of 2000, at spread %.2f", w.spread)
		}
	}

	w.shareLane(5, true, start, at(0))
	w.shareLane(0, false, start, 0)
	w.shareLane(5, false, start, at(poll/3))
	assert.Zero(t, w.spread, "woken, empty, or rows that waited a third of the interval")
	waits(1)

	w.shareLane(5, false, start, at(poll/5))
	assert.InDelta(t, spreadStep, w.spread, 1e-9)
	waits(spreadStep)
	for range 20 {
		w.shareLane(5, false, start, at(0))
	}
	assert.InDelta(t, maxSpread, w.spread, 1e-9, "spread out as far as it goes")
	waits(maxSpread)
	w.back = 1
	waits(float64(int(1)<<maxStandBack) / 2) // standing back a step: at most 2^maxStandBack intervals in all
	w.back = maxStandBack
	waits(1)
	w.back = 0

	w.shareLane(5, false, start, at(poll/3))
	assert.InDelta(t, maxSpread, w.spread, 1e-9, "a third of the interval: as it was")
	w.shareLane(5, false, start, at(poll))
	assert.InDelta(t, maxSpread/spreadStep, w.spread, 1e-9, "drawn in a step")
	for range 20 {
		w.shareLane(5, false, start, at(poll))
	}
	assert.InDelta(t, 1, w.spread, 1e-9, "drawn back to the interval")
	waits(1)
}

// TestWorkersShareTheLane: twelve workers polling a lane every 200 ms
// while mail arrives steadily (committed by the application, nothing
// wakes them) would claim it nearly every time each polls, a few rows
// per claim; spreading their waits out, they claim it less often, and
// every mail is still sent.
func TestWorkersShareTheLane(t *testing.T) {
	t.Parallel()
	s := newSQLiteStore(t)
	ctx := context.Background()
	const workers, poll, mails = 12, 200 * time.Millisecond, 800
	tr := newFuncTransport(nil)
	var claims atomic.Int64
	var wg sync.WaitGroup
	runCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(func() { cancel(); wg.Wait() })
	for range workers {
		w, err := NewWorker(newQueue(t, s.open(t), Lane{RecipientLimit: NoLimit}, nil), tr, &WorkerOptions{
			PollInterval: poll, CleanupInterval: -1, Logger: quietLogger(),
			Observer: &Observer{ClaimFunc: func(e ClaimEvent) {
				if e.Rows > 0 {
					claims.Add(1)
				}
			}}})
		require.NoError(t, err)
		wg.Add(1)
		go func() { defer wg.Done(); assert.NoError(t, w.Run(runCtx)) }()
	}

	app := s.open(t)
	producer := newQueue(t, app, Lane{RecipientLimit: NoLimit}, nil)
	var counted int64
	var began time.Time
	for i := range mails {
		if i == mails/4 { // the workers have had a second and more to settle
			counted, began = claims.Load(), time.Now()
		}
		tx, err := app.BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = producer.Enqueue(ctx, tx, testMessage(fmt.Sprintf("m%d@example.com", i)))
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		time.Sleep(5 * time.Millisecond)
	}
	n, took := claims.Load()-counted, time.Since(began)
	waitProgress(t, "sending", 20*time.Second, mails, func() int { return int(tr.total.Load()) })
	// Stopped before their outcomes are written, the workers would say so.
	waitProgress(t, "recording", 20*time.Second, mails, func() int {
		return countRows(t, app, producer.lane.Table, "status = ?", StatusSent)
	})
	perPoll := float64(n) / (took.Seconds() / poll.Seconds())
	t.Logf("%d claims that took mail in %v: %.1f per poll interval, %d workers", n, took.Round(time.Millisecond), perPoll, workers)
	// Each claiming after a wait of about the interval: 8.9 per interval
	// here (some waits are cut short by the rows a claim took). Shared,
	// each waiting up to maxSpread intervals: 5.4 to 5.7.
	assert.Less(t, perPoll, float64(workers)*0.6, "the workers claim the lane as if each were alone on it")
}

// TestStandingBackStopsListening: on PostgreSQL a worker standing back
// all the way closes its listening connection (every notification costs
// each listener), and listens again when it comes forward, claiming at
// once what was enqueued meanwhile.
func TestStandingBackStopsListening(t *testing.T) {
	t.Parallel()
	s := newPostgresStore(t)
	ctx := context.Background()
	listeners := func() int {
		var n int
		require.NoError(t, s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_stat_activity
  WHERE datname = current_database() AND query LIKE 'LISTEN %'`).Scan(&n))
		return n
	}
	q := newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil)
	tr := newFuncTransport(nil)
	w := idleWorker(t, q, tr)
	waitProgress(t, "listening", 20*time.Second, 1, listeners)

	w.setListening(false)
	waitProgress(t, "the listening connection closed", 20*time.Second, 1, func() int { return 1 - listeners() })

	app := s.open(t)
	producer := newQueue(t, app, Lane{RecipientLimit: NoLimit}, nil)
	tx, err := app.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = producer.Enqueue(ctx, tx, testMessage("late@example.com"))
	require.NoError(t, err)
	require.NoError(t, tx.Commit())

	w.setListening(true)
	waitProgress(t, "listening again", 20*time.Second, 1, listeners)
	waitProgress(t, "sent once it listened again", 20*time.Second, 1, func() int { return int(tr.total.Load()) })
	// Stopped before the outcome is written, the worker would say so.
	waitProgress(t, "recording", 20*time.Second, 1, func() int { return countRows(t, app, q.lane.Table, "status = ?", StatusSent) })
}

// TestAnnounce: the highest id notified is kept; a payload that is not an
// id (an older build's empty one) changes nothing.
func TestAnnounce(t *testing.T) {
	w := &Worker{}
	for _, p := range []string{"7", "", "5", "x", "12", "9"} {
		w.announce(p)
	}
	assert.Equal(t, int64(12), w.announced.Load())
}

// TestNotificationWakesOneWorker: on PostgreSQL every notification reaches
// every listening worker. Four idle workers and mail enqueued one at a
// time elsewhere: the workers that lose a mail to another stand back, look
// whether the announced mail is still waiting before they claim, and do
// not claim when it is taken; so the lane sees a claim or so per mail,
// not one per worker (four claims per mail, three of them empty, before).
func TestNotificationWakesOneWorker(t *testing.T) {
	t.Parallel()
	s := newPostgresStore(t)
	ctx := context.Background()
	const workers, mails = 4, 16
	tr := newFuncTransport(nil)
	var claims, empty atomic.Int64
	var wg sync.WaitGroup
	runCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(func() { cancel(); wg.Wait() })
	for range workers {
		w, err := NewWorker(newQueue(t, s.db, Lane{RecipientLimit: NoLimit}, nil), tr, &WorkerOptions{
			PollInterval: time.Hour, CleanupInterval: -1, Logger: quietLogger(),
			Observer: &Observer{ClaimFunc: func(e ClaimEvent) {
				claims.Add(1)
				if e.Rows == 0 {
					empty.Add(1)
				}
			}}})
		require.NoError(t, err)
		wg.Add(1)
		go func() { defer wg.Done(); assert.NoError(t, w.Run(runCtx)) }()
	}
	waitProgress(t, "the first claims", 20*time.Second, workers, func() int { return int(claims.Load()) })
	waitProgress(t, "listening", 20*time.Second, workers, func() int {
		var n int
		require.NoError(t, s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_stat_activity
  WHERE datname = current_database() AND query LIKE 'LISTEN %'`).Scan(&n))
		return n
	})
	startClaims := claims.Load()

	app := s.open(t)
	producer := newQueue(t, app, Lane{RecipientLimit: NoLimit}, nil)
	for i := range mails {
		tx, err := app.BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = producer.Enqueue(ctx, tx, testMessage(fmt.Sprintf("m%d@example.com", i)))
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		waitProgress(t, "sent after the notification", 20*time.Second, i+1, func() int { return int(tr.total.Load()) })
	}
	// Stopped before their outcomes are written, the workers would say so.
	waitProgress(t, "recording", 20*time.Second, mails, func() int { return countRows(t, app, producer.lane.Table, "status = ?", StatusSent) })
	cancel()
	wg.Wait()
	assert.Equal(t, int64(mails), tr.total.Load(), "each mail sent once")
	n := claims.Load() - startClaims
	t.Logf("%d claims for %d mails, %d workers (%d empty in all)", n, mails, workers, empty.Load())
	assert.Less(t, n, int64(mails*(workers+1)/2), "a notification made most workers claim")
}

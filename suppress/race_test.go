package suppress

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/mail"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/mailspool/mailspool/internal/placeholder"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// raceEnv, set, makes this test binary a worker process of TestSuppressRace
// on the database it names.
const raceEnv = "MAILSPOOL_SUPPRESS_RACE_DB"

const (
	raceTarget = "target@example.com"
	raceLease  = 10 * time.Minute // no heartbeat moves a lease during the test
)

func TestMain(m *testing.M) {
	if u := os.Getenv(raceEnv); u != "" {
		if err := raceWorker(u); err != nil {
			fmt.Fprintln(os.Stderr, "race worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// raceTransport accepts every mail; for each mail to the target it records
// when the claim that leased it began: locked_until minus the lease (the
// claim's clock reading, taken before its transaction began).
type raceTransport struct{ db *sql.DB }

func (t raceTransport) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	if m.To.Address == raceTarget {
		var until int64
		if err := t.db.QueryRowContext(ctx, placeholder.For(t.db, `SELECT locked_until FROM mail_queue WHERE message_id = ?`), m.MessageID).Scan(&until); err != nil {
			return transport.Receipt{}, err
		}
		if _, err := t.db.ExecContext(ctx, placeholder.For(t.db, `INSERT INTO race_sends (claim_ms) VALUES (?)`), until-raceLease.Milliseconds()); err != nil {
			return transport.Receipt{}, err
		}
	}
	return transport.Receipt{MessageID: m.MessageID}, nil
}

func (raceTransport) Close() error { return nil }

// raceWorker runs one worker on the lane until no mail is left to send.
func raceWorker(u string) error {
	db, err := dburl.Open(u)
	if err != nil {
		return err
	}
	defer db.Close()
	list, err := Open(db)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q, err := queue.New(ctx, db, queue.Lane{Name: "default", Screen: list.Screen("default", Policy{})}, nil)
	if err != nil {
		return err
	}
	w, err := queue.NewWorker(q, raceTransport{db}, &queue.WorkerOptions{LeaseMargin: raceLease, PollInterval: 50 * time.Millisecond, Batch: 200, Concurrency: 16, CleanupInterval: -1})
	if err != nil {
		return err
	}
	go func() {
		for ctx.Err() == nil {
			var left int
			if err := db.QueryRow(placeholder.For(db, `SELECT COUNT(*) FROM mail_queue WHERE status IN (?, ?, ?)`), queue.StatusPending, queue.StatusSending, queue.StatusRetry).Scan(&left); err == nil && left == 0 {
				cancel()
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return w.Run(ctx)
}

// TestSuppressRace: 4 worker processes drain 10 000 mails, every 20th to
// one address; the test suppresses that address at a random instant of the
// drain. No mail to it may be sent by a claim that began after the
// suppression committed.
func TestSuppressRace(t *testing.T) {
	if testing.Short() {
		t.Skip("a drain by 4 processes")
	}
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		_, err := s.db.Exec(`CREATE TABLE race_sends (claim_ms BIGINT NOT NULL)`)
		require.NoError(t, err)
		q, err := queue.New(ctx, s.db, queue.Lane{Name: "default"}, nil)
		require.NoError(t, err)
		const total = 10_000
		tx, err := s.db.Begin()
		require.NoError(t, err)
		for i := range total {
			to := fmt.Sprintf("u%d@example.com", i)
			if i%20 == 0 {
				to = raceTarget
			}
			_, err := q.Enqueue(ctx, tx, &transport.Message{From: mail.Address{Address: "shop@example.com"}, To: mail.Address{Address: to}, Subject: "s", Text: "t"})
			require.NoError(t, err)
		}
		require.NoError(t, tx.Commit())

		var workers []*exec.Cmd
		for range 4 {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), raceEnv+"="+s.url)
			cmd.Stderr = os.Stderr
			require.NoError(t, cmd.Start())
			workers = append(workers, cmd)
		}
		t.Cleanup(func() {
			for _, w := range workers {
				_ = w.Process.Kill()
			}
		})

		// Suppress the target once a random share of the mail is sent:
		// at most about half, so that mail to it is still unclaimed then
		// (4 workers hold up to 1 600 rows claimed ahead of their sends;
		// with up to 8 500 sent, they had sometimes claimed every mail to
		// the target, and none was left to fail as suppressed).
		at := 500 + rand.IntN(total/2)
		for {
			var sent int
			require.NoError(t, s.db.QueryRow(placeholder.For(s.db, `SELECT COUNT(*) FROM mail_queue WHERE status = ?`), queue.StatusSent).Scan(&sent))
			if sent >= at {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		l := openList(t, s)
		_, err = l.Add(ctx, Entry{Address: raceTarget, Reason: HardBounce, Source: "race test"})
		require.NoError(t, err)
		committed := time.Now().UnixMilli() // the commit is done by now

		for _, w := range workers {
			require.NoError(t, w.Wait())
		}
		var after, before, suppressed, sentOthers int
		require.NoError(t, s.db.QueryRow(placeholder.For(s.db, `SELECT COUNT(*) FROM race_sends WHERE claim_ms > ?`), committed).Scan(&after))
		require.NoError(t, s.db.QueryRow(placeholder.For(s.db, `SELECT COUNT(*) FROM race_sends WHERE claim_ms <= ?`), committed).Scan(&before))
		require.NoError(t, s.db.QueryRow(placeholder.For(s.db, `SELECT COUNT(*) FROM mail_queue WHERE status = ? AND last_kind = 'suppressed'`), queue.StatusFailed).Scan(&suppressed))
		require.NoError(t, s.db.QueryRow(placeholder.For(s.db, `SELECT COUNT(*) FROM mail_queue WHERE status = ? AND to_addr <> ?`), queue.StatusSent, raceTarget).Scan(&sentOthers))
		t.Logf("%s: suppressed after %d sent; target mails sent by claims begun before: %d, failed as suppressed: %d", s.name, at, before, suppressed)
		assert.Zero(t, after, "sends to the suppressed address by claims that began after the suppression committed")
		assert.Equal(t, total/20, before+suppressed, "every mail to the target is sent (claimed before) or failed as suppressed")
		assert.Positive(t, suppressed)
		assert.Equal(t, total-total/20, sentOthers, "every other mail is sent")
	})
}

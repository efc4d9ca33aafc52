package bench

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/fake"
)

// The classic baseline: a table with the queue state and the body in one
// row, claimed with an id-ordered UPDATE over a derived table, read back by
// locked_by, sent one mail at a time, and acknowledged with one autocommit
// UPDATE per mail. Timestamps are in seconds; the lease is 60 s. It is the
// protocol many tutorials show, kept here as written so that a run can put
// the queue's figures beside it.
var classicSchema = map[string]string{
	"mysql": `CREATE TABLE %s (
  id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY,
  to_addr VARCHAR(255) NOT NULL,
  to_name VARCHAR(64) NOT NULL DEFAULT '',
  subject VARCHAR(255) NOT NULL,
  body MEDIUMTEXT NOT NULL,
  is_html TINYINT NOT NULL DEFAULT 1,
  template VARCHAR(32) NOT NULL DEFAULT '',
  status TINYINT NOT NULL DEFAULT 0,
  attempts TINYINT UNSIGNED NOT NULL DEFAULT 0,
  next_run INT UNSIGNED NOT NULL,
  locked_until INT UNSIGNED NOT NULL DEFAULT 0,
  locked_by VARCHAR(32) NOT NULL DEFAULT '',
  last_error VARCHAR(512) NOT NULL DEFAULT '',
  message_id VARCHAR(128) NOT NULL DEFAULT '',
  created_at INT UNSIGNED NOT NULL,
  sent_at INT UNSIGNED NOT NULL DEFAULT 0,
  KEY idx_pick (status, next_run, id),
  KEY idx_created (created_at),
  KEY idx_to (to_addr, created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='` + ownMark + `'`,
	"sqlite": `CREATE TABLE %s (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  to_addr TEXT NOT NULL,
  to_name TEXT NOT NULL DEFAULT '',
  subject TEXT NOT NULL,
  body TEXT NOT NULL,
  is_html INTEGER NOT NULL DEFAULT 1,
  template TEXT NOT NULL DEFAULT '',
  status INTEGER NOT NULL DEFAULT 0,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_run INTEGER NOT NULL,
  locked_until INTEGER NOT NULL DEFAULT 0,
  locked_by TEXT NOT NULL DEFAULT '',
  last_error TEXT NOT NULL DEFAULT '',
  message_id TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  sent_at INTEGER NOT NULL DEFAULT 0
)`,
}

const classicBatch = 20

func runClassic(ctx context.Context, admin *sql.DB, o *Options) (*Result, error) {
	r := newResult(admin, o, Classic)
	label := "classic"
	t := o.Table + "_classic"
	if _, ok := classicSchema[storeName(admin)]; !ok {
		return nil, fmt.Errorf("bench: the classic algorithm runs on MySQL/MariaDB and SQLite only, not on %s", storeName(admin))
	}
	// guard checked that a table t is the run's own: drop it.
	if err := dropClassic(ctx, admin, t); err != nil {
		return nil, err
	}
	store := storeName(admin)
	stmts := []string{fmt.Sprintf(classicSchema[store], t)}
	if store == "sqlite" {
		stmts = append(stmts, `CREATE INDEX `+t+`_idx_pick ON `+t+` (status, next_run, id)`,
			`CREATE TRIGGER "`+ownTrigger(t)+`" BEFORE DELETE ON `+t+` WHEN 0 BEGIN SELECT 1; END`)
	}
	for _, s := range stmts {
		if _, err := admin.ExecContext(ctx, s); err != nil {
			return nil, fmt.Errorf("bench: classic table: %w", err)
		}
	}
	if o.History > 0 {
		if err := classicHistory(ctx, admin, t, o); err != nil {
			return nil, err
		}
	}
	producers, err := openDB(o.DB, nil)
	if err != nil {
		return nil, err
	}
	defer producers.Close()
	producers.SetMaxOpenConns(o.Producers)
	producers.SetMaxIdleConns(o.Producers)
	run := runID()
	insert := `INSERT INTO ` + t + ` (to_addr, to_name, subject, body, template, next_run, message_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	r.EnqueuePerS, r.P99EnqueueMS, err = produce(ctx, producers, o.Producers, o.Messages, o.Progress, label, nil,
		func(ctx context.Context, tx *sql.Tx, i int) error {
			m := message(run, i)
			now := time.Now().Unix()
			_, err := tx.ExecContext(ctx, insert, m.To.Address, m.To.Name, m.Subject, m.HTML+m.Text, benchTemplate, now, m.MessageID, now)
			return err
		})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Progress, "%s: enqueued %d mails, %.0f/s, p99 %.2f ms\n", label, o.Messages, r.EnqueuePerS, r.P99EnqueueMS)

	tr := newTracker(messageIDs(run, o.Messages))
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	poll := o.PollInterval
	if poll == 0 {
		poll = 2 * time.Second
	}
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		claims    []time.Duration
		deadlocks atomic.Int64
		errs      atomic.Int64
	)
	counters := readCounters(ctx, admin)
	cpu := newCPUClock(ctx, admin)
	cpu0 := cpu.read()
	start := time.Now()
	resetPeakRSS()
	for i := range o.Workers {
		db, err := openDB(o.DB, nil)
		if err != nil {
			return nil, err
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		w := &classicWorker{db: db, table: t, id: fmt.Sprintf("classic-%d", i), poll: poll,
			tr: fake.New(&fake.Options{Latency: o.Latency, Discard: true}), deliver: tr.deliver}
		w.failed = func(err error) {
			if isDeadlock(err) {
				deadlocks.Add(1)
			} else if wctx.Err() == nil {
				errs.Add(1)
			}
		}
		w.claimed = func(d time.Duration) { mu.Lock(); claims = append(claims, d); mu.Unlock() }
		wg.Add(1)
		go func() { defer wg.Done(); w.run(wctx) }()
	}
	tr.wait(ctx, o.Stall, o.Progress, label)
	cancel()
	wg.Wait()
	finish(r, tr, start)
	r.cpuPerMail(cpu0, cpu.read())
	r.perMail(counters, readCounters(ctx, admin))
	r.Deadlocks, r.LogErrors, r.RSSMB = int(deadlocks.Load()), int(errs.Load()), peakRSSMB()
	r.P50ClaimMS, r.P99ClaimMS = percentile(claims, 50), percentile(claims, 99)
	var unsent int
	if err := admin.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+t+` WHERE status <> 2 AND template = ?`, benchTemplate).Scan(&unsent); err != nil {
		return nil, fmt.Errorf("bench: classic: %w", err)
	}
	r.Unrecorded = max(0, unsent-r.Lost)
	return r, nil
}

// dropClassic drops the classic table t if it is there and the run's own.
func dropClassic(ctx context.Context, db *sql.DB, t string) error {
	tables, err := listTables(ctx, db)
	if err != nil {
		return err
	}
	name, ok := find(tables, t)
	if !ok {
		return nil
	}
	if marked, err := isMarked(ctx, db, name); err != nil || !marked {
		if err == nil {
			err = fmt.Errorf("bench: table %s exists and was not created by mailspool bench; bench drops only tables it created", name)
		}
		return err
	}
	if _, err := db.ExecContext(ctx, `DROP TABLE `+name); err != nil {
		return fmt.Errorf("bench: dropping %s: %w", name, err)
	}
	return nil
}

// classicHistory fills the classic table with o.History sent rows.
func classicHistory(ctx context.Context, db *sql.DB, t string, o *Options) error {
	seed := min(o.History, 2000)
	m := message("history", 0)
	now := time.Now().Unix()
	if err := inTx(ctx, db, func(tx *sql.Tx) error {
		for range seed {
			if _, err := tx.ExecContext(ctx, `INSERT INTO `+t+` (to_addr, subject, body, template, status, next_run, created_at, sent_at) VALUES (?, ?, ?, ?, 2, ?, ?, ?)`,
				m.To.Address, m.Subject, m.HTML+m.Text, historyTemplate, now-3600, now-3600, now-3600); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("bench: classic history: %w", err)
	}
	cols := `to_addr, subject, body, template, status, next_run, created_at, sent_at`
	for have := seed; have < o.History; {
		n := min(seed, o.History-have)
		if _, err := db.ExecContext(ctx, `INSERT INTO `+t+` (`+cols+`) SELECT `+cols+` FROM `+t+` WHERE id <= ? ORDER BY id LIMIT ?`, seed, n); err != nil {
			return fmt.Errorf("bench: classic history: %w", err)
		}
		have += n
		if have%(20*seed) == 0 || have == o.History {
			fmt.Fprintf(o.Progress, "classic history: %d/%d rows\n", have, o.History)
		}
	}
	return nil
}

type classicWorker struct {
	db      *sql.DB
	table   string
	id      string
	poll    time.Duration
	tr      transport.Transport
	deliver func(string)
	failed  func(error)
	claimed func(time.Duration)
}

func (w *classicWorker) run(ctx context.Context) {
	claim := `UPDATE ` + w.table + ` SET status = 1, locked_until = ?, locked_by = ?
 WHERE id IN (SELECT id FROM (SELECT id FROM ` + w.table + `
   WHERE status IN (0,3) AND next_run <= ? AND locked_until <= ? ORDER BY id LIMIT ` + fmt.Sprint(classicBatch) + `) t)
   AND status IN (0,3)`
	fetch := `SELECT id, to_addr, to_name, subject, body, message_id FROM ` + w.table + ` WHERE status = 1 AND locked_by = ? AND locked_until >= ?`
	ack := `UPDATE ` + w.table + ` SET status = 2, sent_at = ?, message_id = ? WHERE id = ?`
	for ctx.Err() == nil {
		now := time.Now().Unix()
		t0 := time.Now()
		if _, err := w.db.ExecContext(ctx, claim, now+60, w.id, now, now); err != nil {
			w.failed(err)
		}
		jobs, err := w.fetch(ctx, fetch, now)
		w.claimed(time.Since(t0))
		if err != nil {
			w.failed(err)
		}
		for _, m := range jobs {
			rc, err := w.tr.Send(ctx, &m.msg)
			if err != nil {
				continue
			}
			w.deliver(m.msg.MessageID)
			if _, err := w.db.ExecContext(ctx, ack, time.Now().Unix(), rc.MessageID, m.id); err != nil {
				w.failed(err)
			}
		}
		if len(jobs) < classicBatch {
			select {
			case <-ctx.Done():
			case <-time.After(w.poll):
			}
		}
	}
}

type classicJob struct {
	id  int64
	msg transport.Message
}

func (w *classicWorker) fetch(ctx context.Context, query string, now int64) ([]classicJob, error) {
	rows, err := w.db.QueryContext(ctx, query, w.id, now)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var jobs []classicJob
	for rows.Next() {
		var j classicJob
		var body string
		if err := rows.Scan(&j.id, &j.msg.To.Address, &j.msg.To.Name, &j.msg.Subject, &body, &j.msg.MessageID); err != nil {
			return nil, err
		}
		j.msg.From.Address = "noreply@shop.example"
		j.msg.HTML = body
		jobs = append(jobs, j)
	}
	return jobs, rows.Err()
}

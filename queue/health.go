package queue

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// backoff yields waits from min doubling up to max.
type backoff struct {
	min, max time.Duration
	cur      time.Duration
}

func (b *backoff) next() time.Duration {
	b.cur = min(max(2*b.cur, b.min), b.max)
	return b.cur
}

func (b *backoff) reset() { b.cur = 0 }

// maxClaimBackoff caps the wait between failing claims.
const maxClaimBackoff = 30 * time.Second

// health tracks how long one kind of statement has been failing without a
// break.
type health struct {
	mu           sync.Mutex
	failingSince time.Time
	lastErr      error
}

func (h *health) ok() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failingSince, h.lastErr = time.Time{}, nil
}

func (h *health) failed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failingSince.IsZero() {
		h.failingSince = time.Now()
	}
	h.lastErr = err
}

// check returns an error once what (claims, writes) has been failing for
// limit.
func (h *health) check(what string, limit time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failingSince.IsZero() {
		return nil
	}
	if d := time.Since(h.failingSince); d >= limit {
		return fmt.Errorf("%s have failed for %v: %w", what, d.Round(time.Second), h.lastErr)
	}
	return nil
}

// fileCheck returns a function that fails once the SQLite file the queue
// opened has been deleted or replaced (a restore, a careless rm, a cp over
// it): a worker that went on would write to a file nobody reads, or into
// another database's rows, and never see new mail. A file replaced by
// another is a different file (os.SameFile); a file overwritten in place
// (cp other.db app.db) keeps its identity, so the function also compares
// the schema's own marker, the row mailspool_schema keeps for the lane's
// table (its version and when that was applied), with the one read when
// the check began, at most once a second. For MySQL the function always
// returns nil.
func (q *Queue) fileCheck() (func() error, error) {
	if q.file == "" {
		return func() error { return nil }, nil
	}
	// Without a marker now (a store not migrated yet), the claims will
	// say what is wrong; the file's identity is still checked.
	marker, markerErr := q.schemaMarker()
	var lastMarkerCheck time.Time
	return func() error {
		fi, err := os.Stat(q.file)
		switch {
		case err != nil:
			return fmt.Errorf("queue: the SQLite file %s is gone (%v); restart the worker on the current file", q.file, err)
		case !os.SameFile(q.fileInfo, fi):
			return fmt.Errorf("queue: the SQLite file %s was replaced since the worker opened it; restart the worker on the new file", q.file)
		}
		if markerErr != nil || time.Since(lastMarkerCheck) < time.Second {
			return nil
		}
		lastMarkerCheck = time.Now()
		now, err := q.fileMarker()
		if err == nil && now != marker {
			// An error (busy, a torn read) is the other checks' to judge.
			return fmt.Errorf("queue: the SQLite file %s was replaced (overwritten in place) since the worker opened it: the schema marker of table %s changed from %s to %s; restart the worker on the new file", q.file, q.lane.Table, marker, now)
		}
		return nil
	}, nil
}

// fileMarker is schemaMarker read through a connection of its own, opened
// for the read and closed after it: a pooled connection keeps the pages
// it read in its cache, and in WAL mode nothing tells it that the file
// under it was overwritten, so it would go on answering the old marker.
func (q *Queue) fileMarker() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := q.db.Driver().Open("file:" + q.file + "?mode=ro")
	if err != nil {
		return "", fmt.Errorf("queue: opening %s to read its schema marker: %w", q.file, err)
	}
	defer c.Close()
	qc, ok := c.(driver.QueryerContext)
	if !ok {
		return q.schemaMarker()
	}
	rows, err := qc.QueryContext(ctx, `SELECT version, applied_at FROM `+q.d.quote(schemaTable)+` WHERE tbl = ?`, []driver.NamedValue{{Ordinal: 1, Value: q.lane.Table}})
	if err != nil {
		return "", fmt.Errorf("queue: reading the schema marker of %s: %w", q.lane.Table, err)
	}
	defer rows.Close()
	v := make([]driver.Value, 2)
	switch err := rows.Next(v); {
	case errors.Is(err, io.EOF):
		return "none", nil
	case err != nil:
		return "", fmt.Errorf("queue: reading the schema marker of %s: %w", q.lane.Table, err)
	}
	version, ok1 := v[0].(int64)
	at, ok2 := v[1].(int64)
	if !ok1 || !ok2 {
		return "", fmt.Errorf("queue: the schema marker of %s is not two integers (%T, %T)", q.lane.Table, v[0], v[1])
	}
	return fmt.Sprintf("version %d applied at %d", version, at), nil
}

// schemaMarker is the row mailspool_schema keeps for the lane's table, as
// "version N applied at T" ("none" without one).
func (q *Queue) schemaMarker() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var version, at int64
	err := q.db.QueryRowContext(ctx, `SELECT version, applied_at FROM `+q.d.quote(schemaTable)+` WHERE tbl = ?`, q.lane.Table).Scan(&version, &at)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "none", nil
	case err != nil:
		return "", fmt.Errorf("queue: reading the schema marker of %s: %w", q.lane.Table, err)
	}
	return fmt.Sprintf("version %d applied at %d", version, at), nil
}

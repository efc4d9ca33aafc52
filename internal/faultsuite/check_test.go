package faultsuite

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// figures is what a scenario measured: the accounting of every mail
// against what the provider received.
type figures struct {
	Mails           int // rows in the table
	Sent            int // rows sent
	Failed          int // rows failed
	NotFinal        int // rows still pending, retry or sending
	Delivered       int // distinct mails the provider received
	Duplicates      int // deliveries beyond the first of a mail
	Resent          int // mails delivered more than once
	Lost            int // mails neither delivered nor failed
	SentUndelivered int // rows marked sent that the provider never received
	Unknown         int // deliveries of a Message-ID no row has
	MaybeDelivered  int // rows flagged maybe_delivered
}

// tally accounts for every row of the scenario table against the
// provider's deliveries (p may be nil when the transport is not the
// provider: then only the row states count).
func tally(t *testing.T, s store, p *provider) figures {
	t.Helper()
	return tallyWhere(t, s, p, "1=1")
}

// tallyWhere is tally over the rows matching where (the mails a scenario
// enqueued, not the history it inserted around them).
func tallyWhere(t *testing.T, s store, p *provider, where string) figures {
	t.Helper()
	var got map[string]int
	if p != nil {
		got = p.deliveries()
	}
	rows, err := s.db.Query("SELECT status, message_id, maybe_delivered FROM " + table + " WHERE " + where)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var f figures
	known := map[string]bool{}
	for rows.Next() {
		var status, maybe int
		var id string
		if err := rows.Scan(&status, &id, &maybe); err != nil {
			t.Fatal(err)
		}
		id = normalizeID(id)
		known[id] = true
		f.Mails++
		n := got[id]
		switch status {
		case sent:
			f.Sent++
		case failed:
			f.Failed++
		default:
			f.NotFinal++
		}
		if maybe != 0 {
			f.MaybeDelivered++
		}
		if p == nil {
			continue
		}
		if n > 0 {
			f.Delivered++
		}
		if n > 1 {
			f.Duplicates += n - 1
			f.Resent++
		}
		if n == 0 && status != failed {
			f.Lost++
		}
		if n == 0 && status == sent {
			f.SentUndelivered++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for id := range got {
		if !known[id] && where == "1=1" {
			f.Unknown++
		}
	}
	return f
}

// report prints a scenario's figures on one line, followed by extra
// key=value pairs (kills, durations, ratios).
func report(t *testing.T, f figures, extra ...any) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "FIGURES %s: mails=%d sent=%d failed=%d not_final=%d delivered=%d duplicates=%d resent=%d lost=%d sent_undelivered=%d maybe_delivered=%d",
		t.Name(), f.Mails, f.Sent, f.Failed, f.NotFinal, f.Delivered, f.Duplicates, f.Resent, f.Lost, f.SentUndelivered, f.MaybeDelivered)
	for i := 0; i+1 < len(extra); i += 2 {
		v := extra[i+1]
		switch x := v.(type) {
		case time.Duration:
			if x < time.Second { // enqueue latencies are milliseconds
				v = x.Round(10 * time.Microsecond)
			} else {
				v = x.Round(10 * time.Millisecond)
			}
		case float64:
			v = fmt.Sprintf("%.2f", x)
		}
		fmt.Fprintf(&b, " %v=%v", extra[i], v)
	}
	t.Log(b.String())
}

// checkFinal fails the test unless every row is in a final state, none was
// marked sent without a delivery, nothing is lost, and no delivery is of an
// unknown mail.
func checkFinal(t *testing.T, f figures) {
	t.Helper()
	if f.NotFinal != 0 {
		t.Errorf("%d of %d rows are not in a final state (sent or failed)", f.NotFinal, f.Mails)
	}
	if f.Lost != 0 {
		t.Errorf("%d mails lost: neither delivered nor failed", f.Lost)
	}
	if f.SentUndelivered != 0 {
		t.Errorf("%d rows marked sent that the provider never received", f.SentUndelivered)
	}
	if f.Unknown != 0 {
		t.Errorf("%d deliveries of a Message-ID that no row has", f.Unknown)
	}
}

// waitProgress polls every 100 ms until done returns true. It fails the
// test when progress has returned the same value for stall: the wait is
// bounded by a lack of progress, not by how fast the machine is.
func waitProgress(t *testing.T, what string, stall time.Duration, progress func() int64, done func() bool) {
	t.Helper()
	last, since := progress(), time.Now()
	for !done() {
		time.Sleep(100 * time.Millisecond)
		if p := progress(); p != last {
			last, since = p, time.Now()
			continue
		}
		if time.Since(since) > stall {
			t.Fatalf("%s: no progress for %s (progress stuck at %d)", what, stall, last)
		}
	}
}

// finished counts the rows in a final state (sent or failed).
func finished(t *testing.T, s store) int64 {
	t.Helper()
	return int64(countWhere(t, s, "status IN (?, ?)", sent, failed))
}

// drained waits until every row is sent or failed, failing after stall
// without progress (rows finishing or deliveries arriving).
func drained(t *testing.T, s store, p *provider, stall time.Duration) {
	t.Helper()
	drainedWhere(t, s, p, "1=1", stall)
}

// drainedWhere is drained for the rows matching where.
func drainedWhere(t *testing.T, s store, p *provider, where string, stall time.Duration) {
	t.Helper()
	total := countWhere(t, s, where)
	done := func() int { return countWhere(t, s, "status IN (?, ?) AND ("+where+")", sent, failed) }
	progress := func() int64 {
		n := int64(done())
		if p != nil {
			n += int64(p.count()) << 32
		}
		return n
	}
	waitProgress(t, "drain", stall, progress, func() bool { return done() == total })
}

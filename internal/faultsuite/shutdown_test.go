package faultsuite

import (
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestSIGTERMAndRecycle drains 1 500 mails through 2 workers that recycle
// after 100 mails (--max-messages, exit 0, restarted like systemd does) and
// are sent SIGTERM every 150 deliveries. Every exit must be clean (status
// 0) and leave none of the process's rows in sending, and since nothing
// crashed, no mail may be sent twice.
func TestSIGTERMAndRecycle(t *testing.T) {
	scenario(t)
	t.Parallel() // runs inside the lock scenario's idle minute; see TestDatabaseLockMidDrain
	for _, st := range serverStores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			sigtermRecycle(t, st.open(t))
		})
	}
}

func sigtermRecycle(t *testing.T, s store) {
	const mails, maxMessages, termEvery = 1500, 100, 150
	p := startProvider(t)
	p.setStall(10 * time.Millisecond)
	enqueue(t, s, mails, "term")
	cfg := writeConfig(t, s, p.url(), `batch = 20
concurrency = 8
poll_interval = "200ms"`)

	var mu sync.Mutex
	var exits, unclean, leftSending int
	onExit := func(proc *process) { // runs on the supervisor's goroutine: no t.Fatal here
		var held int
		if err := s.db.QueryRow(s.sql("SELECT COUNT(*) FROM "+table+" WHERE status = ? AND locked_by LIKE ?"),
			sending, "%-"+itoa(proc.cmd.Process.Pid)+"-%").Scan(&held); err != nil {
			t.Errorf("counting the rows of worker pid %d: %v", proc.cmd.Process.Pid, err)
		}
		mu.Lock()
		defer mu.Unlock()
		exits++
		if proc.code != 0 {
			unclean++
			t.Errorf("worker pid %d exited with status %d (signal %v)", proc.cmd.Process.Pid, proc.code, proc.signal)
		}
		if held != 0 {
			leftSending += held
			t.Errorf("worker pid %d exited leaving %d rows in sending", proc.cmd.Process.Pid, held)
		}
	}
	arg := fmt.Sprintf("--max-messages=%d", maxMessages)
	ws := []*supervised{
		startWorkerHook(t, "worker1", cfg, true, onExit, arg),
		startWorkerHook(t, "worker2", cfg, true, onExit, arg),
	}
	dumpLogs(t, ws...)

	start := time.Now()
	terms := 0
	for k := 1; (k+1)*termEvery < mails; k++ {
		waitProgress(t, fmt.Sprintf("deliveries before SIGTERM %d", k), 60*time.Second,
			func() int64 { return int64(p.count()) }, func() bool { return p.count() >= k*termEvery })
		ws[k%2].kill(syscall.SIGTERM)
		terms++
	}
	drained(t, s, p, 60*time.Second)
	took := time.Since(start)
	for _, w := range ws {
		w.stop(30 * time.Second)
	}

	f := tally(t, s, p)
	recycles := len(logLines(ws, "recycling after max messages"))
	mu.Lock()
	report(t, f, "sigterms", terms, "recycles", recycles, "exits", exits, "unclean_exits", unclean, "left_in_sending", leftSending, "drain", took)
	mu.Unlock()
	checkFinal(t, f)
	if f.Resent != 0 {
		t.Errorf("%d mails sent twice without any crash", f.Resent)
	}
	if recycles == 0 {
		t.Error("no worker recycled after --max-messages")
	}
	if errs := logLines(ws, "level=ERROR", "panic:"); len(errs) > 0 {
		t.Errorf("errors in the worker logs:\n%s", strings.Join(errs, "\n"))
	}
}

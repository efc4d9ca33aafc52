package faultsuite

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// TestSIGKILLDuringDrain kills worker processes with SIGKILL 20 times
// during a drain of 5 000 mails by 3 workers, each restarted like systemd
// does. Nothing may be lost, no row may be sent without a delivery, and
// every duplicate must be explained by a kill: at most the rows the killed
// processes held in sending.
func TestSIGKILLDuringDrain(t *testing.T) {
	scenario(t)
	for _, st := range serverStores {
		t.Run(st.name, func(t *testing.T) { sigkillDrain(t, st.open(t)) })
	}
}

func sigkillDrain(t *testing.T, s store) {
	const mails, kills, workers = 5000, 20, 3
	p := startProvider(t)
	p.setStall(2 * time.Millisecond)
	enqueue(t, s, mails, "kill")
	// A lease runs 2s past the last heartbeat, so a killed worker's rows
	// come back at the next rescue (every 5s) after that.
	cfg := writeConfig(t, s, p.url(), `batch = 20
concurrency = 10
send_timeout = "2s"
lease_margin = "2s"
poll_interval = "200ms"`)
	ws := make([]*supervised, workers)
	for i := range ws {
		ws[i] = startWorker(t, fmt.Sprintf("worker%d", i+1), cfg, true)
	}
	dumpLogs(t, ws...)

	start := time.Now()
	inFlight := 0 // rows the killed processes held in sending
	// Kills are spread by progress, not by time: kill k happens once the
	// provider has seen k*200 deliveries, so all 20 land inside the drain
	// however fast the machine is.
	for k := 1; k <= kills; k++ {
		waitProgress(t, fmt.Sprintf("deliveries before kill %d", k), 60*time.Second,
			func() int64 { return int64(p.count()) + finished(t, s)<<32 },
			func() bool { return p.count() >= k*mails/(kills+5) })
		proc := ws[k%workers].kill(syscall.SIGKILL)
		// The killed process's claims are still in sending (their leases
		// have not run out yet): exactly the mails in flight at the kill.
		inFlight += heldBy(t, s, proc.cmd.Process.Pid)
	}
	killedAt := time.Since(start)
	drained(t, s, p, 60*time.Second)
	took := time.Since(start)

	f := tally(t, s, p)
	report(t, f, "kills", kills, "in_flight_at_kills", inFlight, "kills_done_after", killedAt, "drain", took)
	checkFinal(t, f)
	if f.Sent != mails {
		t.Errorf("%d of %d mails sent", f.Sent, mails)
	}
	if f.Duplicates > inFlight {
		t.Errorf("%d duplicate deliveries, more than the %d mails in flight at the kills", f.Duplicates, inFlight)
	}
}

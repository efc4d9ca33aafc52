package faultsuite

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// writeConfig writes a config file with the scenario's database and one
// lane "fault" on table mail_queue sending through transportURL, without
// rate limits; extra is more TOML lines for the lane.
func writeConfig(t *testing.T, s store, transportURL, extra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mailspool.toml")
	cfg := fmt.Sprintf("database = %q\n\n[lanes.fault]\ntable = %q\ntransport = %q\nrecipient_limit = \"off\"\nip_limit = \"off\"\n%s\n",
		s.url, table, transportURL, extra)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// mailspool runs a mailspool command to its end and returns its combined
// output; it fails the test if the command fails.
func mailspool(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(binary, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("mailspool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// supervised is one "mailspool worker" slot. With restart it behaves like
// systemd's Restart=always: whenever the process exits, for any reason, a
// new one starts 100 ms later, until the test stops it.
type supervised struct {
	t       *testing.T
	name    string
	args    []string
	restart bool
	logPath string
	// onExit, when set, runs after each process exits, before a restart.
	onExit func(*process)

	mu       sync.Mutex
	cur      *process
	runs     []*process
	stopping bool
	done     chan struct{} // closed when the slot has stopped for good
}

// process is one run of the worker.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	code   int // exit status; -1 when ended by a signal
	signal syscall.Signal
}

// startWorker starts a worker slot running "mailspool worker --config cfg"
// plus args. The slot is stopped with SIGTERM when the test ends.
func startWorker(t *testing.T, name, cfg string, restart bool, args ...string) *supervised {
	t.Helper()
	return startWorkerHook(t, name, cfg, restart, nil, args...)
}

// startWorkerHook is startWorker with onExit run after each process exits.
func startWorkerHook(t *testing.T, name, cfg string, restart bool, onExit func(*process), args ...string) *supervised {
	t.Helper()
	w := &supervised{t: t, name: name, restart: restart, onExit: onExit, done: make(chan struct{}),
		args:    append([]string{"worker", "--config", cfg}, args...),
		logPath: filepath.Join(t.TempDir(), name+".log")}
	w.mu.Lock()
	first, err := w.spawn()
	w.mu.Unlock()
	if err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go w.loop(first)
	t.Cleanup(func() { w.stop(30 * time.Second) })
	return w
}

// spawn starts a process; w.mu must be held, so that stop never misses it.
func (w *supervised) spawn() (*process, error) {
	logf, err := os.OpenFile(w.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(binary, w.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	w.cur = p
	w.runs = append(w.runs, p)
	return p, nil
}

func (w *supervised) loop(p *process) {
	defer close(w.done)
	for {
		err := p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if st, ok := ee.Sys().(syscall.WaitStatus); ok && st.Signaled() {
				p.signal = st.Signal()
			}
		}
		if w.onExit != nil {
			w.onExit(p)
		}
		close(p.exited)
		w.mu.Lock()
		again := w.restart && !w.stopping
		w.mu.Unlock()
		if !again {
			return
		}
		time.Sleep(100 * time.Millisecond)
		w.mu.Lock()
		if w.stopping {
			w.mu.Unlock()
			return
		}
		var serr error
		p, serr = w.spawn()
		w.mu.Unlock()
		if serr != nil {
			w.t.Errorf("restarting %s: %v", w.name, serr)
			return
		}
	}
}

// current returns the process running now (the last one started).
func (w *supervised) current() *process {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur
}

// kill waits until the running process has started its worker (so it has
// its signal handlers and may hold rows), sends it sig and waits until it
// has exited; it returns the process.
func (w *supervised) kill(sig syscall.Signal) *process {
	w.t.Helper()
	var p *process
	for p == nil {
		waitProgress(w.t, w.name+" starting", 30*time.Second, func() int64 { return int64(len(w.processes())) }, w.started)
		// A restart may have come in between: then wait for that one.
		if cur := w.current(); w.started() && cur == w.current() {
			p = cur
		}
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		w.t.Fatalf("signalling %s: %v", w.name, err)
	}
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		w.t.Fatalf("%s (pid %d) did not exit within 60s of %v", w.name, p.cmd.Process.Pid, sig)
	}
	return p
}

// started reports whether the last process started has started its worker:
// it then has its signal handlers (before, SIGTERM would kill it like
// SIGKILL) and may hold rows.
func (w *supervised) started() bool {
	return strings.Count(w.log(), "worker starting") >= len(w.processes())
}

// stop stops restarting, sends SIGTERM once the last process has started
// (or ended) and waits for the slot to end (then SIGKILL after grace).
func (w *supervised) stop(grace time.Duration) {
	w.mu.Lock()
	w.stopping = true
	p := w.cur
	w.mu.Unlock()
	for deadline := time.Now().Add(grace); !w.started() && time.Now().Before(deadline); {
		select {
		case <-w.done:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	select {
	case <-w.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(grace):
		w.t.Errorf("%s did not stop within %s of SIGTERM; killing it", w.name, grace)
		w.mu.Lock()
		p = w.cur
		w.mu.Unlock()
		_ = p.cmd.Process.Kill()
		<-w.done
	}
}

// processes returns every run so far.
func (w *supervised) processes() []*process {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*process(nil), w.runs...)
}

// log returns what every run of the slot wrote.
func (w *supervised) log() string {
	b, _ := os.ReadFile(w.logPath)
	return string(b)
}

// dumpLogs writes the tail of each slot's log to the test log when the
// test has failed.
func dumpLogs(t *testing.T, ws ...*supervised) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, w := range ws {
			l := w.log()
			if len(l) > 6000 {
				l = "..." + l[len(l)-6000:]
			}
			t.Logf("--- log of %s ---\n%s", w.name, l)
		}
	})
}

// logLines returns the lines of the slots' logs that contain any of subs.
func logLines(ws []*supervised, subs ...string) []string {
	var out []string
	for _, w := range ws {
		for line := range strings.SplitSeq(w.log(), "\n") {
			for _, s := range subs {
				if strings.Contains(line, s) {
					out = append(out, w.name+": "+line)
					break
				}
			}
		}
	}
	return out
}

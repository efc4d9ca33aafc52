package faultsuite

import (
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // the driver for the readiness check
)

// privateMariaDB is a mariadbd of the test's own: its own data directory,
// socket and port, so that a scenario can stop and restart it without
// touching the shared server.
type privateMariaDB struct {
	bin, dir string
	port     int
	cmd      *exec.Cmd
	exited   chan struct{}
}

// restartAllowed says whether scenarios that restart a database server
// run: under CI=true or with MAILSPOOL_FAULTS_RESTART=1.
func restartAllowed() bool {
	return os.Getenv("CI") == "true" || os.Getenv("MAILSPOOL_FAULTS_RESTART") == "1"
}

// startPrivateMariaDB starts a private mariadbd on an empty data directory
// (--skip-grant-tables: root without a password, no system tables needed)
// and stops it when the test ends. Without mariadbd the test fails under
// CI=true and skips elsewhere.
func startPrivateMariaDB(t *testing.T) *privateMariaDB {
	t.Helper()
	if !restartAllowed() {
		t.Skip("restarts a private mariadbd: runs under CI=true or with MAILSPOOL_FAULTS_RESTART=1")
	}
	bin, err := exec.LookPath("mariadbd")
	if err != nil {
		bin = "/usr/sbin/mariadbd"
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mariadbd is required under CI=true: %v (apt-get install mariadb-server)", err)
		}
		t.Skipf("mariadbd not found (%v); install mariadb-server", err)
	}
	dir, err := os.MkdirTemp("", "mailspool-mariadbd-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	m := &privateMariaDB{bin: bin, dir: dir, port: freePort(t)}
	t.Cleanup(func() {
		m.stop(t)
		os.RemoveAll(dir)
	})
	m.start(t)
	return m
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// start starts mariadbd and waits until it answers.
func (m *privateMariaDB) start(t *testing.T) {
	t.Helper()
	args := []string{"--no-defaults", "--datadir=" + filepath.Join(m.dir, "data"),
		"--socket=" + filepath.Join(m.dir, "sock"), "--port=" + strconv.Itoa(m.port), "--bind-address=127.0.0.1",
		"--skip-grant-tables", "--skip-name-resolve", "--innodb-buffer-pool-size=64M",
		"--log-error=" + filepath.Join(m.dir, "error.log"), "--pid-file=" + filepath.Join(m.dir, "mariadbd.pid")}
	if os.Getuid() == 0 {
		args = append(args, "--user=root")
	}
	m.cmd = exec.Command(m.bin, args...)
	m.exited = make(chan struct{})
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("starting mariadbd: %v", err)
	}
	go func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
	}(m.cmd, m.exited)
	db := m.server(t)
	defer db.Close()
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		if db.Ping() == nil {
			return
		}
		select {
		case <-m.exited:
			log, _ := os.ReadFile(filepath.Join(m.dir, "error.log"))
			t.Fatalf("mariadbd exited while starting:\n%s", log)
		default:
		}
		if time.Since(start) > 60*time.Second {
			t.Fatal("private mariadbd did not answer within 60s of starting")
		}
	}
}

// stop shuts mariadbd down cleanly (SIGTERM) and waits for it to exit.
func (m *privateMariaDB) stop(t *testing.T) {
	t.Helper()
	if m.cmd == nil {
		return
	}
	select {
	case <-m.exited:
		return
	default:
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(60 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.exited
		t.Error("private mariadbd did not shut down within 60s of SIGTERM")
	}
}

// url is the mysql:// URL of database name on the private server.
func (m *privateMariaDB) url(name string) string {
	return fmt.Sprintf("mysql://root@127.0.0.1:%d/%s", m.port, name)
}

// server opens a handle on the server without a database (the private
// server has no system databases).
func (m *privateMariaDB) server(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/", m.port))
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// exec runs one statement on the server.
func (m *privateMariaDB) exec(t *testing.T, stmt string) {
	t.Helper()
	db := m.server(t)
	defer db.Close()
	if _, err := db.Exec(stmt); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

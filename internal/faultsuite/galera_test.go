package faultsuite

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// galeraProvider is where Debian's galera-4 puts the wsrep provider.
const galeraProvider = "/usr/lib/galera/libgalera_smm.so"

// galeraAllowed says whether the Galera scenario runs: under CI=true or
// with MAILSPOOL_GALERA=1 (it starts three mariadbd and drains 40 000
// mails: minutes on a small machine).
func galeraAllowed() bool {
	return os.Getenv("CI") == "true" || os.Getenv("MAILSPOOL_GALERA") == "1"
}

// galeraMails is how many mails each part of the scenario drains: 20 000,
// or $MAILSPOOL_GALERA_MAILS (a quicker run while working on it).
func galeraMails(t *testing.T) int {
	n := 20000
	if v := os.Getenv("MAILSPOOL_GALERA_MAILS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 100 {
			t.Fatalf("MAILSPOOL_GALERA_MAILS=%q: want a number of mails, at least 100", v)
		}
	}
	return n
}

// galeraNode is one mariadbd of a private Galera cluster: its own data
// directory, SQL port, group communication (gcomm), IST and SST ports.
type galeraNode struct {
	name                  string
	dir                   string
	port, gcomm, ist, sst int
	cmd                   *exec.Cmd
	exited                chan struct{}
	conflictsAtKill       int64 // read before the node was killed
}

// galera is a private 3-node MariaDB Galera cluster on loopback, never the
// shared server: three mariadbd with wsrep_on, rsync SST, the first node
// bootstrapped with --wsrep-new-cluster.
type galera struct {
	dir   string
	nodes []*galeraNode
}

// startGalera starts the cluster and waits until its three nodes are
// Synced; it stops them when the test ends. Without mariadbd, galera-4 or
// rsync the test fails under CI=true and skips elsewhere.
func startGalera(t *testing.T) *galera {
	t.Helper()
	if !galeraAllowed() {
		t.Skip("starts a 3-node Galera cluster: runs under CI=true or with MAILSPOOL_GALERA=1")
	}
	var missing []string
	for _, bin := range []string{"mariadbd", "mariadb-install-db", "rsync", "wsrep_sst_rsync"} {
		if _, err := exec.LookPath(bin); err != nil {
			if _, err := os.Stat("/usr/sbin/" + bin); err != nil {
				missing = append(missing, bin)
			}
		}
	}
	if _, err := os.Stat(galeraProvider); err != nil {
		missing = append(missing, galeraProvider)
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("the Galera scenario needs %s (apt-get install mariadb-server galera-4 rsync)", strings.Join(missing, ", "))
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir, err := os.MkdirTemp("", "mailspool-galera-")
	if err != nil {
		t.Fatal(err)
	}
	g := &galera{dir: dir}
	t.Cleanup(func() {
		g.stop(t)
		os.RemoveAll(dir)
	})
	// As root, mariadbd runs as mysql: rsync's SST daemon, started by
	// the joiner, would otherwise run as nobody and could not write the
	// joiner's data directory.
	runAs := ""
	if os.Getuid() == 0 {
		runAs = "mysql"
		if _, err := user.Lookup(runAs); err != nil {
			t.Fatalf("running as root, the cluster's mariadbd run as user mysql: %v", err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		n := &galeraNode{name: fmt.Sprintf("node%d", i+1), dir: filepath.Join(dir, fmt.Sprintf("node%d", i+1)),
			port: freePort(t), gcomm: freePort(t), ist: freePort(t), sst: freePort(t)}
		g.nodes = append(g.nodes, n)
	}
	var members []string
	for _, n := range g.nodes {
		members = append(members, "127.0.0.1:"+strconv.Itoa(n.gcomm))
	}
	for _, n := range g.nodes {
		if err := os.MkdirAll(filepath.Join(n.dir, "data"), 0o700); err != nil {
			t.Fatal(err)
		}
		cnf := fmt.Sprintf(`[mysqld]
datadir=%[1]s/data
socket=%[1]s/sock
pid-file=%[1]s/mariadbd.pid
log-error=%[1]s/error.log
port=%[2]d
bind-address=127.0.0.1
skip-grant-tables
skip-name-resolve
innodb-buffer-pool-size=64M
innodb-flush-log-at-trx-commit=2
binlog_format=ROW
innodb_autoinc_lock_mode=2
default-storage-engine=InnoDB
wsrep_on=ON
wsrep_provider=%[3]s
wsrep_cluster_name=mailspool_faults
wsrep_cluster_address=gcomm://%[4]s
wsrep_node_name=%[5]s
wsrep_node_address=127.0.0.1:%[6]d
wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:%[6]d;ist.recv_addr=127.0.0.1:%[7]d;gcache.size=64M"
wsrep_sst_method=rsync
wsrep_sst_receive_address=127.0.0.1:%[8]d
`, n.dir, n.port, galeraProvider, strings.Join(members, ","), n.name, n.gcomm, n.ist, n.sst)
		if runAs != "" {
			cnf += "user=" + runAs + "\n"
		}
		if err := os.WriteFile(n.cnf(), []byte(cnf), 0o644); err != nil {
			t.Fatal(err)
		}
		if runAs != "" {
			if out, err := exec.Command("chown", "-R", runAs+":", n.dir).CombinedOutput(); err != nil {
				t.Fatalf("chown %s: %v: %s", n.dir, err, out)
			}
		}
	}
	// The first node's system tables; the others receive them by SST.
	install := []string{"--defaults-file=" + g.nodes[0].cnf(), "--auth-root-authentication-method=normal", "--skip-test-db"}
	if runAs != "" {
		install = append(install, "--user="+runAs)
	}
	if out, err := exec.Command("mariadb-install-db", install...).CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	g.nodes[0].start(t, "--wsrep-new-cluster")
	g.waitSynced(t, g.nodes[:1])
	g.nodes[1].start(t)
	g.nodes[2].start(t)
	g.waitSynced(t, g.nodes)
	return g
}

func (n *galeraNode) cnf() string { return filepath.Join(n.dir, "my.cnf") }

func (n *galeraNode) start(t *testing.T, args ...string) {
	t.Helper()
	n.cmd = exec.Command(mariadbdPath(), append([]string{"--defaults-file=" + n.cnf()}, args...)...)
	n.exited = make(chan struct{})
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", n.name, err)
	}
	go func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
	}(n.cmd, n.exited)
}

func mariadbdPath() string {
	if bin, err := exec.LookPath("mariadbd"); err == nil {
		return bin
	}
	return "/usr/sbin/mariadbd"
}

// alive reports whether the node's mariadbd is running.
func (n *galeraNode) alive() bool {
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// server is a handle on the node without a database.
func (n *galeraNode) server() *sql.DB {
	db, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/?timeout=2s", n.port))
	if err != nil {
		panic(err) // a constant DSN
	}
	db.SetMaxOpenConns(1)
	return db
}

// status reads one of the node's wsrep status variables.
func (n *galeraNode) status(name string) (string, error) {
	db := n.server()
	defer db.Close()
	var k, v string
	err := db.QueryRow("SHOW GLOBAL STATUS LIKE '"+name+"'").Scan(&k, &v)
	return v, err
}

// conflicts reads the node's certification failures and the local
// transactions aborted by replicated ones (brute-force aborts).
func (n *galeraNode) conflicts() (int64, error) {
	var sum int64
	for _, name := range []string{"wsrep_local_cert_failures", "wsrep_local_bf_aborts"} {
		v, err := n.status(name)
		if err != nil {
			return 0, err
		}
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s = %q", name, v)
		}
		sum += x
	}
	return sum, nil
}

// errorLog is the node's error log.
func (n *galeraNode) errorLog() string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "error.log"))
	return string(b)
}

// waitSynced waits until every node of nodes answers and is Synced. The
// nodes' error logs growing is progress (state transfers take what a
// loaded machine gives them).
func (g *galera) waitSynced(t *testing.T, nodes []*galeraNode) {
	t.Helper()
	synced := func() bool {
		for _, n := range nodes {
			if s, err := n.status("wsrep_local_state_comment"); err != nil || s != "Synced" {
				return false
			}
		}
		return true
	}
	progress := func() int64 {
		var size int64
		for _, n := range nodes {
			if !n.alive() {
				t.Fatalf("%s exited while starting:\n%s", n.name, tail(n.errorLog(), 4000))
			}
			size += int64(len(n.errorLog()))
		}
		return size
	}
	waitProgress(t, "Galera nodes synced", 90*time.Second, progress, synced)
}

// url is the mysql:// URL of database name listing the nodes, first the
// node of index first, then the others in order.
func (g *galera) url(name string, first int) string {
	var hosts []string
	for i := range g.nodes {
		hosts = append(hosts, "127.0.0.1:"+strconv.Itoa(g.nodes[(first+i)%len(g.nodes)].port))
	}
	return fmt.Sprintf("mysql://root@%s/%s", strings.Join(hosts, ","), name)
}

// exec runs a statement on the first live node.
func (g *galera) exec(t *testing.T, stmt string) {
	t.Helper()
	for _, n := range g.nodes {
		if !n.alive() {
			continue
		}
		db := n.server()
		defer db.Close()
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("%s on %s: %v", stmt, n.name, err)
		}
		return
	}
	t.Fatal("no Galera node is running")
}

// conflicts sums the certification conflicts of every node: read now on
// the live ones, before the kill on a killed one.
func (g *galera) conflicts(t *testing.T) int64 {
	t.Helper()
	var sum int64
	for _, n := range g.nodes {
		if !n.alive() {
			sum += n.conflictsAtKill
			continue
		}
		c, err := n.conflicts()
		if err != nil {
			t.Fatalf("reading %s's conflict counters: %v", n.name, err)
		}
		sum += c
	}
	return sum
}

// kill sends the node's mariadbd SIGKILL (its conflict counters are read
// first) and waits until it has exited.
func (g *galera) kill(t *testing.T, n *galeraNode) {
	t.Helper()
	c, err := n.conflicts()
	if err != nil {
		t.Fatalf("reading %s's conflict counters: %v", n.name, err)
	}
	n.conflictsAtKill = c
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-n.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not exit within 60s of SIGKILL", n.name)
	}
}

// stop shuts every live node down (SIGTERM, then SIGKILL after 60s).
func (g *galera) stop(t *testing.T) {
	for _, n := range g.nodes {
		if n.alive() {
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, n := range g.nodes {
		if n.cmd == nil {
			continue
		}
		select {
		case <-n.exited:
		case <-time.After(60 * time.Second):
			_ = n.cmd.Process.Kill()
			<-n.exited
			t.Errorf("%s did not shut down within 60s of SIGTERM", n.name)
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

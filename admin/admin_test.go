package admin_test

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mailspool/mailspool/admin"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func openDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := dburl.Open("sqlite:" + filepath.Join(t.TempDir(), "q.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestHealthz(t *testing.T) {
	db := openDB(t)
	// Stall is the room each request that expects 200 has after the lane's
	// start or its last turn: ample on a loaded machine.
	h := admin.NewHealth(db, &admin.HealthOptions{Stall: 2 * time.Second})
	obs := h.Lane("transactional")
	srv, err := admin.Listen("127.0.0.1:0", admin.Handler(prometheus.NewRegistry(), h))
	require.NoError(t, err)
	defer srv.Shutdown(context.Background()) //nolint:errcheck
	url := "http://" + srv.Addr().String() + "/healthz"

	code, body := get(t, url)
	assert.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "ok\n", body)

	// A loop that stops turning makes the process unhealthy once Stall has
	// passed: wait for that, and no longer than needed.
	require.Eventually(t, func() bool { return h.Loops() != nil }, 10*time.Second, 20*time.Millisecond)
	code, body = get(t, url)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "claim loop stalled: transactional (no claim for")

	// The breaker holds claiming for a while: that is no stall, though the
	// loop has not turned for longer than Stall (checked while it is
	// stalled, so no sleep past Stall).
	obs.BreakerFunc(queue.BreakerEvent{Lane: "transactional", Open: true, Until: time.Now().Add(time.Hour)})
	assert.NoError(t, h.Loops(), "paused by the breaker is not stalled")
	obs.BreakerFunc(queue.BreakerEvent{Lane: "transactional"})
	assert.Error(t, h.Loops(), "the breaker closed, the stall counts again")

	obs.ClaimFunc(queue.ClaimEvent{Lane: "transactional"})
	code, _ = get(t, url)
	assert.Equal(t, http.StatusOK, code, "a turn of the loop makes it healthy again")

	require.NoError(t, db.Close())
	code, body = get(t, url)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "database does not answer")
}

func TestListenRefusesABoundAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	_, err = admin.Listen(ln.Addr().String(), http.NotFoundHandler())
	assert.ErrorContains(t, err, "admin: listen on "+ln.Addr().String())
}

// notifySocket stands in for systemd: a unixgram socket in NOTIFY_SOCKET.
func notifySocket(t *testing.T) *net.UnixConn {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return conn
}

// next reads the next datagram; "" after no datagram for a while.
func next(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	buf := make([]byte, 4096)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	n, err := conn.Read(buf)
	if err != nil {
		return ""
	}
	return string(buf[:n])
}

func TestSystemdNotifyProtocol(t *testing.T) {
	conn := notifySocket(t)
	t.Setenv("WATCHDOG_USEC", "90000") // 90 ms: fed every 30 ms
	t.Setenv("WATCHDOG_PID", "")

	require.NoError(t, admin.NotifyReady())
	assert.Equal(t, "READY=1", next(t, conn))

	h := admin.NewHealth(openDB(t), &admin.HealthOptions{Stall: time.Hour})
	h.Lane("transactional")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		admin.Watchdog(ctx, h, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	for range 3 {
		assert.Equal(t, "WATCHDOG=1", next(t, conn), "fed while the claim loop turns")
	}
	cancel()
	<-done

	require.NoError(t, admin.NotifyStopping())
	for msg := next(t, conn); msg != "STOPPING=1"; msg = next(t, conn) {
		require.Equal(t, "WATCHDOG=1", msg, "only a late feed may come before STOPPING")
	}
}

func TestWatchdogTriggersOnAWedgedLoop(t *testing.T) {
	conn := notifySocket(t)
	t.Setenv("WATCHDOG_USEC", "60000")
	t.Setenv("WATCHDOG_PID", "")
	h := admin.NewHealth(openDB(t), &admin.HealthOptions{Stall: 100 * time.Millisecond})
	h.Lane("transactional") // and it never turns
	done := make(chan struct{})
	go func() {
		defer close(done)
		admin.Watchdog(context.Background(), h, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	var last string
	for msg := next(t, conn); msg != ""; msg = next(t, conn) {
		last = msg
		if strings.Contains(msg, "WATCHDOG=trigger") {
			break
		}
		require.Equal(t, "WATCHDOG=1", msg)
	}
	assert.Contains(t, last, "STATUS=admin: claim loop stalled: transactional")
	assert.Contains(t, last, "WATCHDOG=trigger", "systemd is asked to restart the wedged worker")
	<-done // and it stops feeding
}

func TestWatchdogOffWithoutSystemd(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	t.Setenv("WATCHDOG_USEC", "")
	require.NoError(t, admin.NotifyReady(), "no systemd: nothing to tell")
	admin.Watchdog(context.Background(), admin.NewHealth(openDB(t), nil), slog.Default()) // returns at once
}

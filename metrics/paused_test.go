package metrics_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mailspool/mailspool/admin"
	"github.com/mailspool/mailspool/metrics"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/transport/fake"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPausedLaneIsDegradedAndCounted: a lane an operator pauses shows as
// mailspool_lane_paused 1 and in /healthz as degraded (200, naming the lane,
// who paused it and why) while its worker runs; resumed, both clear.
func TestPausedLaneIsDegradedAndCounted(t *testing.T) {
	ctx := context.Background()
	q, db := openQueue(t, "bulk")
	reg := prometheus.NewRegistry()
	m := metrics.New(&metrics.Options{})
	require.NoError(t, reg.Register(m))
	mobs, err := m.Lane(q, "fake://")
	require.NoError(t, err)
	h := admin.NewHealth(db, &admin.HealthOptions{Stall: time.Hour})
	handler := admin.Handler(reg, h)
	w, err := queue.NewWorker(q, fake.New(nil), &queue.WorkerOptions{PollInterval: 10 * time.Millisecond,
		Observer: queue.JoinObservers(mobs, h.Lane("bulk")), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	defer func() { cancel(); <-done }()

	healthz := func() (int, string) {
		srv := httptest.NewServer(handler)
		defer srv.Close()
		resp, err := http.Get(srv.URL + "/healthz")
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	paused := func() float64 {
		families, _ := scrape(t, handler)
		return value(t, families["mailspool_lane_paused"], map[string]string{"lane": "bulk"})
	}
	// waitFor polls until cond holds; the worker reads the pause once a
	// poll interval (a second when that is shorter), so it fails only
	// after many seconds without the change.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for start := time.Now(); !cond(); time.Sleep(20 * time.Millisecond) {
			require.Less(t, time.Since(start), 30*time.Second, "no %s", what)
		}
	}
	assert.Zero(t, paused())
	code, body := healthz()
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", body)

	require.NoError(t, q.Pause(ctx, "provider incident"))
	waitFor("pause seen", func() bool { return paused() == 1 })
	code, body = healthz()
	assert.Equal(t, http.StatusOK, code, "a paused lane is degraded, not down")
	assert.True(t, strings.HasPrefix(body, "degraded\n"), body)
	assert.Regexp(t, `lane bulk paused by operator since \S+Z: provider incident \(mailspool resume --lane bulk\)`, body)

	require.NoError(t, q.Resume(ctx))
	waitFor("resume seen", func() bool { return paused() == 0 })
	_, body = healthz()
	assert.Equal(t, "ok\n", body)
}

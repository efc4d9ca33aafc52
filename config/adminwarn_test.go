package config_test

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailspool/mailspool/admin/statuspage"
	"github.com/mailspool/mailspool/config"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/suppress"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a log a worker writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// An admin listener off loopback serves /metrics and /healthz to the
// network: the worker says so with a warning, not only an info line.
func TestAdminListenerOffLoopbackWarns(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, err := config.Load(writeConfig(t, "admin_listen = \"0.0.0.0:0\"\n[lanes.tx]\ntransport = \"fake://\"\npoll_interval = \"20ms\"\n"), "sqlite:"+filepath.Join(t.TempDir(), "q.db"))
	require.NoError(t, err)
	db, err := cfg.Open()
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, queue.Migrate(ctx, db, config.Tables(cfg.Lanes)...))
	require.NoError(t, suppress.Migrate(ctx, db))
	var logs syncBuffer
	page := cfg.StatusPage
	page.Credentials = statuspage.Credentials{Token: "0123456789abcdef0123456789abcdef"}
	done := make(chan error, 1)
	go func() {
		done <- config.Run(ctx, db, cfg.Lanes, &config.RunOptions{AdminListen: cfg.AdminListen, StatusPage: page, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	}()
	for !strings.Contains(logs.String(), "admin listener serving") {
		select {
		case err := <-done:
			t.Fatalf("Run returned: %v\n%s", err, logs.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	require.NoError(t, <-done)
	assert.Contains(t, logs.String(), "level=WARN msg=\"ADMIN LISTENER OFF LOOPBACK")
}

package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/throttle"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stats shows each lane's send limits, their use and a slow-down.
func TestStatsShowsLimits(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "q.db")
	cfg := writeFile(t, "mailspool.toml", `
[throttle.domains.gmail]
match = ["gmail.com", "googlemail.com"]
rate = "10/s"
concurrency = 3
[lanes.tx]
transport = "fake://"
[lanes.tx.throttle]
rate = "50/s"
`)
	code, _, stderr := mailspool(t, "migrate", "--config", cfg, "--db", db)
	require.Equal(t, 0, code, stderr)

	h, err := dburl.Open(db)
	require.NoError(t, err)
	defer h.Close()
	st, err := throttle.Open(h)
	require.NoError(t, err)
	ctx := context.Background()
	gmail := throttle.Limit{Key: "domain:gmail", Rate: throttle.Rate{N: 10, Per: time.Second}, Concurrency: 3}
	require.NoError(t, st.Acquire(ctx, "w1.1", 1, time.Minute, []throttle.Limit{gmail}))
	require.NoError(t, st.Slow(ctx, gmail.Key, 0.5, time.Hour, time.Hour, "gmail-4.7.28"))
	_, _, err = st.Schedule(ctx, h, gmail, 50) // 50 mails given back by claims, at 10/s
	require.NoError(t, err)

	code, out, stderr := mailspool(t, "stats", "--config", cfg, "--db", db)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "limit lane:tx")
	assert.Contains(t, out, "rate 50/1s burst 1, unlimited")
	assert.Contains(t, out, "limit domain:gmail")
	assert.Contains(t, out, "1/3 in flight")
	assert.Contains(t, out, "1 granted")
	assert.Contains(t, out, "slowed to 50% by gmail-4.7.28")
	// The 50 promised turns come due at 5/s (10/s slowed to half) from
	// now: each second the stats run later, about 5 fewer wait.
	m := regexp.MustCompile(`about (\d+) mails wait behind it`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	textWaiting, _ := strconv.Atoi(m[1])
	assert.True(t, textWaiting >= 1 && textWaiting <= 50, "waiting %d, want 1..50", textWaiting)

	code, out, stderr = mailspool(t, "stats", "--config", cfg, "--db", db, "--json")
	require.Equal(t, 0, code, stderr)
	var lanes []struct {
		Limits []struct {
			Key        string  `json:"key"`
			Factor     float64 `json:"factor"`
			InFlight   int     `json:"in_flight"`
			SlowReason string  `json:"slow_reason"`
			Waiting    int     `json:"waiting"`
		} `json:"limits"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &lanes))
	require.Len(t, lanes[0].Limits, 2)
	assert.Equal(t, "domain:gmail", lanes[0].Limits[1].Key)
	assert.InDelta(t, 0.5, lanes[0].Limits[1].Factor, 0.001)
	assert.Equal(t, 1, lanes[0].Limits[1].InFlight)
	assert.Equal(t, "gmail-4.7.28", lanes[0].Limits[1].SlowReason)
	assert.LessOrEqual(t, lanes[0].Limits[1].Waiting, textWaiting, "fewer wait at the later run")
	assert.Positive(t, lanes[0].Limits[1].Waiting)
}

func TestBenchThrottleUsage(t *testing.T) {
	code, _, stderr := mailspool(t, "bench", "--throttle", "--latency", "0s")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--latency")
	code, _, stderr = mailspool(t, "bench", "--throttle", "--workers", "0")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--workers 0")
}

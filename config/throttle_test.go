package config_test

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailspool/mailspool/config"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl"
	"github.com/mailspool/mailspool/throttle"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadThrottle(t *testing.T) {
	t.Setenv("MAILSPOOL_DATABASE", "")
	cfg, err := config.Load(writeConfig(t, `
[throttle]
lease = "3m"
builtin_receivers = true
[throttle.domains.gmail]
match = ["gmail.com", "googlemail.com"]
rate = "10/s"
burst = 1
concurrency = 3
[throttle.domains.microsoft]
match = ["outlook.com", "hotmail.*", "*.outlook.com"]
concurrency = 5
[throttle.providers.sg]
rate = "600/1m"
[[throttle.rules]]
name = "acme"
text = "slow down please"
target = "domain"
factor = 0.25
hold = "5m"

[lanes.bulk]
transport = "fake://?script=ok"
[lanes.bulk.throttle]
rate = "50/s"
burst = 10
provider = "sg"
[lanes.bulk.throttle.domains.gmail]
match = ["gmail.com"]
rate = "2/s"

[lanes.resets]
transport = "fake://?script=ok"
table = "resets"
`), "")
	require.NoError(t, err)
	bulk, resets := cfg.Lanes[0].Throttle, cfg.Lanes[1].Throttle
	assert.Equal(t, 3*time.Minute, bulk.Lease)
	require.Len(t, bulk.Limits, 2)
	assert.Equal(t, throttle.Limit{Key: "lane:bulk", Rate: throttle.Rate{N: 50, Per: time.Second, Burst: 10}}, bulk.Limits[0])
	assert.Equal(t, throttle.Limit{Key: "provider:sg", Rate: throttle.Rate{N: 600, Per: time.Minute}}, bulk.Limits[1])
	require.Len(t, bulk.Groups, 4, "bulk.gmail, gmail, microsoft (the operator's), the built-in yahoo")
	assert.Equal(t, "bulk.gmail", bulk.Groups[0].Name, "the lane's own group comes first")
	assert.Equal(t, "gmail", bulk.Groups[1].Name)
	assert.Equal(t, throttle.Rate{N: 10, Per: time.Second, Burst: 1}, bulk.Groups[1].Rate)
	assert.Equal(t, "operator:acme", bulk.Rules[0].Name, "operator rules before the built-in ones")
	assert.Greater(t, len(bulk.Rules), len(throttle.DefaultRules))
	assert.Empty(t, resets.Limits)
	require.Len(t, resets.Groups, 3)
	assert.Equal(t, 5, resets.Groups[1].Concurrency, "the operator's microsoft group replaces the built-in one")
	assert.Equal(t, "yahoo", resets.Groups[2].Name)
	assert.Equal(t, 20, resets.Groups[2].Concurrency)
}

func TestThrottleConfigErrors(t *testing.T) {
	t.Setenv("MAILSPOOL_DATABASE", "")
	lane := "\n[lanes.bulk]\ntransport = \"fake://?script=ok\"\n"
	for _, c := range []struct{ toml, want string }{
		{"[throttle.domains.gmail]\nmatch = [\"gmail.com\"]\nrate = \"ten/s\"\n", `throttle.domains.gmail: rate "ten/s" is not N/DURATION`},
		{"[throttle.domains.gmail]\nmatch = [\"gmail.com\"]\n", "throttle.domains.gmail: limits nothing"},
		{"[throttle.domains.gmail]\nrate = \"1/s\"\n", "no domain to match"},
		{"[throttle.domains.gmail]\nmatch = [\"a@gmail.com\"]\nrate = \"1/s\"\n", "is not a domain or pattern"},
		{"[throttle.domains.gmail]\nmatch = [\"[gmail.com\"]\nrate = \"1/s\"\n", "pattern"},
		{"[throttle.domains.Gmail]\nmatch = [\"gmail.com\"]\nrate = \"1/s\"\n", "a name is 1 to 63"},
		{"[throttle.domains.gmail]\nmatch = [\"gmail.com\"]\nburst = 3\n", "burst 3 without a rate"},
		{"[throttle.domains.gmail]\nmatch = [\"gmail.com\"]\nconcurrency = -1\n", "concurrency: -1 is negative"},
		{"[throttle.providers.ses]\nses_quota = true\n", "throttle.providers.ses: no lane names it"},
		{"[throttle]\nlease = \"soon\"\n", "throttle.lease"},
		{"[[throttle.rules]]\nname = \"x\"\ntarget = \"domain\"\nfactor = 0.5\nhold = \"1m\"\n", "matches nothing"},
		{"[[throttle.rules]]\nname = \"x\"\ncode = 421\ntarget = \"domain\"\nfactor = 2\nhold = \"1m\"\n", "factor 2 must be above 0 and below 1"},
		{"[[throttle.rules]]\nname = \"x\"\ntext = \"(\"\ntarget = \"domain\"\nfactor = 0.5\nhold = \"1m\"\n", "text: error parsing regexp"},
		{"[throttle.domains.gmail]\nmatch = [\"gmail.com\"]\nrate = \"1/s\"\nspeed = 3\n", "unknown key"},
	} {
		_, err := config.Load(writeConfig(t, c.toml+lane), "")
		if assert.Error(t, err, c.toml) {
			assert.Contains(t, err.Error(), c.want)
		}
	}
	for _, c := range []struct{ toml, want string }{
		{"[lanes.bulk.throttle]\nprovider = \"nope\"\n", `lanes.bulk.throttle.provider: "nope" is not a [throttle.providers.NAME]`},
		{"[throttle.providers.ses]\nses_quota = true\n[lanes.bulk.throttle]\nprovider = \"ses\"\n", "takes its rate from SES (ses_quota) but the lane's transport is not ses://"},
		{"[lanes.bulk.throttle]\nrate = \"5/0s\"\n", "lanes.bulk.throttle: rate"},
	} {
		_, err := config.Load(writeConfig(t, lane+c.toml), "")
		if assert.Error(t, err, c.toml) {
			assert.Contains(t, err.Error(), c.want)
		}
	}
}

// sesAccount is an SES v2 endpoint that answers GetAccount
// (GET /v2/email/account) as SES does.
func sesAccount(t *testing.T, status int, body string) (*httptest.Server, *atomic.Int32) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v2/email/account" {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKIDTEST/") {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-Requestid", "req-1")
		if status != http.StatusOK {
			w.Header().Set("X-Amzn-Errortype", "AccessDeniedException")
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func sesConfig(t *testing.T, endpoint string) []config.Lane {
	t.Setenv("MAILSPOOL_DATABASE", "")
	cfg, err := config.Load(writeConfig(t, `
[throttle.providers.ses]
ses_quota = true
[lanes.bulk]
transport = "ses://AKIDTEST:s3cretKEY@default?region=us-east-1&endpoint=`+endpoint+`"
[lanes.bulk.throttle]
provider = "ses"
`), "")
	require.NoError(t, err)
	return cfg.Lanes
}

func migratedSQLite(t *testing.T) *sql.DB {
	db, err := dburl.Open("sqlite:" + filepath.Join(t.TempDir(), "q.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	require.NoError(t, queue.Migrate(context.Background(), db))
	require.NoError(t, throttle.Migrate(context.Background(), db))
	return db
}

func TestThrottleRateFromSESQuota(t *testing.T) {
	srv, calls := sesAccount(t, http.StatusOK, `{"DedicatedIpAutoWarmupEnabled":false,"EnforcementStatus":"HEALTHY","ProductionAccessEnabled":true,
"SendQuota":{"Max24HourSend":50000.0,"MaxSendRate":14.0,"SentLast24Hours":12.0},"SendingEnabled":true}`)
	lanes := sesConfig(t, srv.URL)
	db := migratedSQLite(t)
	require.NoError(t, config.Throttle(context.Background(), db, lanes, nil, nil))
	assert.Equal(t, int32(1), calls.Load())
	require.Len(t, lanes[0].Throttle.Limits, 1)
	assert.Equal(t, throttle.Rate{N: 14, Per: time.Second, Burst: 1}, lanes[0].Throttle.Limits[0].Rate)
	assert.NotNil(t, lanes[0].Lane.Throttle)

	r, err := config.SESQuotaRate(0.5)
	require.NoError(t, err)
	assert.Equal(t, throttle.Rate{N: 500, Per: 1000 * time.Second, Burst: 1}, r)
}

func TestThrottleSESQuotaRefused(t *testing.T) {
	srv, _ := sesAccount(t, http.StatusForbidden, `{"message":"User is not authorized to perform: ses:GetAccount"}`)
	lanes := sesConfig(t, srv.URL)
	err := config.Throttle(context.Background(), migratedSQLite(t), lanes, nil, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "provider:ses takes its rate from SES")
	assert.Contains(t, err.Error(), "give it a rate instead")
	assert.NotContains(t, err.Error(), "s3cretKEY")
}

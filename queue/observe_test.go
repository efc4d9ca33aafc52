package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The worker tells its Observer every claim and outcome, and logs a line at
// info for each mail not sent, naming the domain but never the address.
func TestWorkerObserverAndOutcomeLog(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		clock := newManualClock()
		q := newQueue(t, s.db, Lane{Name: "tx", RecipientLimit: NoLimit}, clock)
		sent, err := q.Enqueue(ctx, s.db, testMessage("ann@Example.com"))
		require.NoError(t, err)
		bounced, err := q.Enqueue(ctx, s.db, testMessage("bob@example.org"))
		require.NoError(t, err)
		late, err := q.Enqueue(ctx, s.db, testMessage("cat@example.net"), NotAfter(clock.Now().Add(time.Minute)))
		require.NoError(t, err)
		clock.Advance(2 * time.Minute)
		tr := newFuncTransport(func(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
			if m.To.Address == "bob@example.org" {
				return transport.Receipt{}, &transport.Error{Kind: transport.Permanent, Scope: transport.ScopeRecipient, Rule: "smtp-recipient", Code: 550, Enhanced: "5.1.1", Detail: "<bob@example.org>: no such user"}
			}
			return transport.Receipt{MessageID: "prov-1"}, nil
		})

		var mu sync.Mutex
		var claims []ClaimEvent
		outcomes := map[int64]OutcomeEvent{}
		obs := &Observer{
			ClaimFunc: func(e ClaimEvent) { mu.Lock(); claims = append(claims, e); mu.Unlock() },
			OutcomeFunc: func(e OutcomeEvent) {
				mu.Lock()
				outcomes[e.ID] = e
				mu.Unlock()
			},
		}
		var logs bytes.Buffer
		w, err := NewWorker(q, tr, &WorkerOptions{
			MaxMessages: 3, CleanupInterval: -1, Observer: obs,
			Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		})
		require.NoError(t, err)
		w.Run(ctx)

		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, claims)
		assert.Equal(t, ClaimEvent{Lane: "tx", Rows: 3}, claims[0])
		require.Len(t, outcomes, 3)
		o := outcomes[sent]
		assert.Equal(t, StatusSent, o.Status)
		assert.Equal(t, "sent", o.Kind)
		assert.True(t, o.Sent)
		assert.Equal(t, "prov-1", o.ProviderID)
		assert.Equal(t, "example.com", o.Domain)
		assert.WithinDuration(t, clock.Now().Add(-2*time.Minute), o.Enqueued, time.Second, "the enqueue time, for the latency")
		o = outcomes[bounced]
		assert.Equal(t, OutcomeEvent{Lane: "tx", ID: bounced, Status: StatusFailed, Kind: "permanent", Code: 550, Enhanced: "5.1.1",
			Scope: "recipient", Rule: "smtp-recipient", Domain: "example.org", Attempts: 1, Sent: true, SendDuration: o.SendDuration, Enqueued: o.Enqueued,
			Error: "permanent: 550 5.1.1 <*@example.org>: no such user"}, o)
		o = outcomes[late]
		assert.Equal(t, "expired", o.Kind)
		assert.False(t, o.Sent)
		assert.Equal(t, StatusFailed, o.Status)

		// One JSON object a line; the mail not sent at info, the sent one at debug.
		byID := map[float64]map[string]any{}
		for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &m), line)
			if id, ok := m["id"].(float64); ok {
				byID[id] = m
			}
		}
		b := byID[float64(bounced)]
		require.NotNil(t, b, logs.String())
		assert.Equal(t, "INFO", b["level"])
		assert.Equal(t, "mail not sent", b["msg"])
		assert.Equal(t, "permanent", b["kind"])
		assert.Equal(t, 550.0, b["code"])
		assert.Equal(t, "5.1.1", b["enhanced"])
		assert.Equal(t, "recipient", b["scope"])
		assert.Equal(t, "smtp-recipient", b["rule"])
		assert.Equal(t, "example.org", b["domain"])
		assert.Equal(t, "failed", b["status"])
		assert.Equal(t, "INFO", byID[float64(late)]["level"])
		assert.Equal(t, "DEBUG", byID[float64(sent)]["level"])
		assert.Equal(t, "prov-1", byID[float64(sent)]["provider_id"])
		for _, addr := range []string{"ann@", "bob@", "cat@"} {
			assert.NotContains(t, logs.String(), addr, "never the full address")
		}
	})
}

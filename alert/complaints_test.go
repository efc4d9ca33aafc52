package alert

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/mailspool/mailspool/inbound"
	"github.com/mailspool/mailspool/internal/placeholder"
	"github.com/mailspool/mailspool/internal/sqlstore"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/suppress"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestComplaintRateAlert(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *sql.DB) {
		ctx := context.Background()
		require.NoError(t, suppress.Migrate(ctx, db))
		require.NoError(t, inbound.Migrate(ctx, db))
		hook := newWebhook(t, 0)
		q := newQueue(t, db)
		a := newAlerter(t, db, q, Thresholds{ComplaintRate: 0.003, ComplaintProvider: "sendgrid", MinAttempts: 100}, Options{WebhookURL: hook.URL})

		enqueue(t, q, db, 1000)
		_, err := db.Exec(placeholder.For(db, `UPDATE mail_queue SET status = ?, next_run = ?, provider_id = `+concatPID(db)), queue.StatusSent, time.Now().UnixMilli())
		require.NoError(t, err)
		store, err := inbound.OpenStore(db)
		require.NoError(t, err)
		// The events are linked to the lane's mails by provider id, as
		// mailspool serve links them (config.EventLinker).
		link := func(ctx context.Context, ids []string) (map[string]inbound.Link, error) {
			rows, err := q.List(ctx, queue.ListOptions{Filter: queue.Filter{ProviderIDs: ids}, Limit: queue.MaxListLimit})
			found := map[string]inbound.Link{}
			for _, r := range rows {
				found[r.ProviderID] = inbound.Link{Lane: q.Lane().Name, MailID: r.ID}
			}
			return found, err
		}
		complain := func(from, n int, pid string) {
			var evs []inbound.Event
			for i := from; i < from+n; i++ {
				evs = append(evs, inbound.Event{Provider: "sendgrid", EventID: fmt.Sprint("c", i), Type: inbound.Complained, Recipient: fmt.Sprintf("u%d@example.com", i), ProviderMessageID: fmt.Sprintf(pid, i+1), Time: time.Now()})
			}
			_, err := store.RecordLinked(ctx, evs, link)
			require.NoError(t, err)
		}
		complain(0, 3, "pid-%d")   // 0.3 %: at the threshold, not over it
		complain(3, 5, "other-%d") // complaints about another lane's mail (same provider) are not this lane's
		require.NoError(t, a.Check(ctx))
		_, accepted := hook.got()
		assert.Empty(t, accepted)

		complain(8, 1, "pid-%d") // 4 of 1000: 0.4 %
		require.NoError(t, a.Check(ctx))
		_, accepted = hook.got()
		require.Len(t, accepted, 1)
		assert.Equal(t, "complaint_rate", accepted[0]["condition"])
		assert.Equal(t, 0.004, accepted[0]["value"])
	})
}

// concatPID is the SQL of 'pid-' || id on db's store.
func concatPID(db *sql.DB) string {
	if s, _ := sqlstore.Of(db); s == sqlstore.MySQL {
		return `CONCAT('pid-', id)`
	}
	return `'pid-' || id`
}

func TestComplaintRateNeedsAProvider(t *testing.T) {
	th := Thresholds{ComplaintRate: 0.003}
	assert.ErrorContains(t, th.Validate(), "ses:// or sendgrid://")
	th = Thresholds{ComplaintRate: 0.003, ComplaintProvider: "ses"}
	require.NoError(t, th.Validate())
	assert.Equal(t, DefaultComplaintWindow, th.ComplaintWindow)
}

// TestOneFailingConditionLeavesTheOthers: a condition whose query fails
// (here the complaint rate, with the provider events' table missing: a
// worker whose serve side was never migrated) is reported as an error,
// and the lane's other conditions are still settled: the backlog alert
// goes out.
func TestOneFailingConditionLeavesTheOthers(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *sql.DB) {
		ctx := context.Background()
		hook := newWebhook(t, 0)
		q := newQueue(t, db)
		a := newAlerter(t, db, q, Thresholds{Backlog: 2, ComplaintRate: 0.003, ComplaintProvider: "sendgrid"}, Options{WebhookURL: hook.URL})
		enqueue(t, q, db, 3)
		err := a.Check(ctx)
		require.ErrorContains(t, err, "counting complaints")
		_, accepted := hook.got()
		require.Len(t, accepted, 1, "the backlog alert went out all the same")
		assert.Equal(t, "backlog", accepted[0]["condition"])
	})
}

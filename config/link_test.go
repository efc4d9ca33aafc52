package config_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/mailspool/mailspool/config"
	"github.com/mailspool/mailspool/inbound"
	"github.com/mailspool/mailspool/internal/placeholder"
	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/queue/dburl/dburltest"
	"github.com/mailspool/mailspool/suppress"
	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An event is stored with the lane and id of the mail it is about, found
// by its provider message id when it arrives (not only joined when read);
// an event no mail matches is kept, unlinked; complaints count per lane.
func TestEventLinker(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testEventLinker(t, "sqlite:"+filepath.Join(t.TempDir(), "q.db")) })
	t.Run("mariadb", func(t *testing.T) { testEventLinker(t, dburltest.MariaDB.Fresh(t)) })
	t.Run("postgres", func(t *testing.T) { testEventLinker(t, dburltest.Postgres.Fresh(t)) })
}

func testEventLinker(t *testing.T, dbURL string) {
	ctx := context.Background()
	cfg, err := config.Load(writeConfig(t, "[lanes.a]\ntransport = \"fake://\"\n[lanes.b]\ntable = \"mail_b\"\ntransport = \"fake://\"\n"), dbURL)
	require.NoError(t, err)
	db, err := cfg.Open()
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, queue.Migrate(ctx, db, config.Tables(cfg.Lanes)...))
	require.NoError(t, suppress.Migrate(ctx, db))
	require.NoError(t, inbound.Migrate(ctx, db))
	ids := map[string]int64{}
	for _, l := range cfg.Lanes {
		q, err := queue.New(ctx, db, l.Lane, nil)
		require.NoError(t, err)
		for i := range 2 { // a second mail, so that the id found is not just the first
			id, err := q.Enqueue(ctx, db, &transport.Message{From: addr("shop@example.com"), To: addr(l.Lane.Name + "@example.com"), Subject: "s", Text: "t"})
			require.NoError(t, err)
			if i == 1 {
				_, err = db.Exec(placeholder.For(db, `UPDATE `+l.Lane.Table+` SET status = 2, provider_id = ? WHERE id = ?`), "pid-"+l.Lane.Name, id)
				require.NoError(t, err)
				ids[l.Lane.Name] = id
			}
		}
	}
	link, err := config.EventLinker(ctx, db, cfg.Lanes)
	require.NoError(t, err)
	byMsg, err := config.EventMessageLinker(ctx, db, cfg.Lanes)
	require.NoError(t, err)
	qb, err := queue.New(ctx, db, cfg.Lanes[1].Lane, nil)
	require.NoError(t, err)
	first, err := qb.Row(ctx, ids["b"]-1) // lane b's first mail, never sent: no provider id
	require.NoError(t, err)
	store, err := inbound.OpenStore(db)
	require.NoError(t, err)
	now := time.Now()
	_, err = store.RecordLinks(ctx, []inbound.Event{
		{Provider: inbound.SendGrid, EventID: "e1", Type: inbound.Complained, Recipient: "b@example.com", ProviderMessageID: "pid-b", Time: now},
		{Provider: inbound.SendGrid, EventID: "e2", Type: inbound.Bounced, Recipient: "a@example.com", ProviderMessageID: "pid-a", Time: now},
		{Provider: inbound.SendGrid, EventID: "e3", Type: inbound.Complained, Recipient: "x@example.com", ProviderMessageID: "pid-unknown", Time: now},
		{Provider: inbound.SES, EventID: "e4", Type: inbound.Deferred, Recipient: "b@example.com", ProviderMessageID: "pid-unknown-2", MessageID: "<" + first.MessageID + ">", Time: now},
	}, inbound.Links{ByProviderID: link, ByMessageID: byMsg})
	require.NoError(t, err)

	got, err := store.Recent(ctx, "", 10)
	require.NoError(t, err)
	byID := map[string]inbound.Event{}
	for _, e := range got {
		byID[e.EventID] = e
	}
	require.Len(t, byID, 4)
	assert.Equal(t, "b", byID["e4"].Lane, "linked by our Message-ID when the provider id matches nothing")
	assert.Equal(t, first.ID, byID["e4"].MailID)
	assert.Equal(t, "b", byID["e1"].Lane)
	assert.Equal(t, ids["b"], byID["e1"].MailID)
	assert.Equal(t, "a", byID["e2"].Lane)
	assert.Equal(t, ids["a"], byID["e2"].MailID)
	assert.Empty(t, byID["e3"].Lane, "kept, unlinked")
	assert.Zero(t, byID["e3"].MailID)

	evs, err := store.ForLaneMail(ctx, "b", ids["b"])
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.Equal(t, "e1", evs[0].EventID)

	since := now.Add(-time.Hour)
	for lane, want := range map[string]int64{"a": 0, "b": 1} {
		n, err := store.CountLane(ctx, lane, inbound.Complained, since)
		require.NoError(t, err)
		assert.Equal(t, want, n, "complaints of lane %s", lane)
	}
}

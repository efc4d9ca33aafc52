package suppress

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAddLookupRemove(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		l := openList(t, s)
		now := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
		l.SetClock(func() time.Time { return now })

		_, err := l.Add(ctx, Entry{Address: "Ann <Ann@Example.COM>", Reason: HardBounce, Source: "operator"})
		require.NoError(t, err)
		_, err = l.Add(ctx, Entry{Address: "news@example.com", Scope: "marketing", Reason: Unsubscribe})
		require.NoError(t, err)
		_, err = l.Add(ctx, Entry{Address: "gone@example.com", Reason: Manual, ExpiresAt: now.Add(time.Hour)})
		require.NoError(t, err)

		found, err := l.Lookup(ctx, s.db, "transactional", []string{"ANN@example.com", "news@example.com", "gone@example.com", "other@example.com", "not an address"})
		require.NoError(t, err)
		require.Len(t, found, 2, "ann (all) and gone (not yet expired); news is suppressed in marketing only")
		assert.Equal(t, HardBounce, found["ANN@example.com"].Reason, "looked up under its normalized form, keyed as given")
		assert.Equal(t, "ann@example.com", found["ANN@example.com"].Address)

		found, err = l.Lookup(ctx, s.db, "marketing", []string{"news@example.com"})
		require.NoError(t, err)
		assert.Equal(t, Unsubscribe, found["news@example.com"].Reason)

		now = now.Add(2 * time.Hour) // gone's entry expired
		found, err = l.Lookup(ctx, s.db, "transactional", []string{"gone@example.com"})
		require.NoError(t, err)
		assert.Empty(t, found)

		es, err := l.Entries(ctx, Filter{})
		require.NoError(t, err)
		assert.Len(t, es, 2, "expired entries are not listed by default")
		_, err = l.Add(ctx, Entry{Address: "zero\u200bwidth@example.com", Reason: Manual})
		assert.ErrorIs(t, err, ErrAddress, "a format character is refused")
		es, err = l.Entries(ctx, Filter{Expired: true, Reason: Manual})
		require.NoError(t, err)
		require.Len(t, es, 1)
		es, err = l.Entries(ctx, Filter{Scope: "marketing"})
		require.NoError(t, err)
		require.Len(t, es, 1)
		assert.Equal(t, "news@example.com", es[0].Address)

		// One mailbox, one entry: any spelling of the domain (UTS #46), any
		// case of the local part, as the recipient limits count it.
		_, err = l.Add(ctx, Entry{Address: "Jörg@xn--bcher-kva.example", Reason: Complaint})
		require.NoError(t, err)
		found, err = l.Lookup(ctx, s.db, "transactional", []string{"JÖRG@BÜCHER.example", "jörg@bücher\u3002example"})
		require.NoError(t, err)
		assert.Len(t, found, 2)

		n, err := l.Remove(ctx, "ann@EXAMPLE.com", "")
		require.NoError(t, err)
		assert.EqualValues(t, 1, n)
		found, err = l.Lookup(ctx, s.db, "transactional", []string{"ann@example.com"})
		require.NoError(t, err)
		assert.Empty(t, found)
	})
}

func TestAddRefusesBadInput(t *testing.T) {
	l := openList(t, newSQLite(t))
	ctx := context.Background()
	for _, e := range []Entry{
		{Address: "no-at-sign", Reason: Manual},
		{Address: "a@b.example", Reason: "soft_bounce"},
		{Address: "a@b.example", Reason: Manual, Scope: "Bad Scope"},
		{Address: "a@b.example\r\nBcc: x@y", Reason: Manual},
	} {
		_, err := l.Add(ctx, e)
		assert.Error(t, err, "%+v", e)
	}
	es, err := l.Entries(ctx, Filter{})
	require.NoError(t, err)
	assert.Empty(t, es)
	err = l.AddAll(ctx, []Entry{{Address: "ok@example.com", Reason: Manual}, {Address: "bad", Reason: Manual}})
	require.ErrorContains(t, err, "entry 2")
	es, err = l.Entries(ctx, Filter{})
	require.NoError(t, err)
	assert.Empty(t, es, "all or none")
}

func TestExportParseRoundTrip(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	in := []Entry{
		{Address: "a@example.com", Scope: ScopeAll, Reason: HardBounce, Source: "mail:default/7", CreatedAt: created},
		{Address: "b@example.com", Scope: "marketing", Reason: Unsubscribe, CreatedAt: created, ExpiresAt: created.Add(24 * time.Hour)},
	}
	for _, f := range []Format{CSV, JSON} {
		var buf bytes.Buffer
		require.NoError(t, Export(&buf, f, in))
		out, err := Parse(&buf, f, ParseOptions{})
		require.NoError(t, err, f)
		assert.Equal(t, in, out, f)
	}
}

func TestParseProviderExports(t *testing.T) {
	// SendGrid's bounces export: the reason is the bounce text.
	sg := "email,created,reason,status\nA@Example.com,1700000000,\"550 5.1.1 no such user\",5.1.1\n"
	es, err := Parse(strings.NewReader(sg), CSV, ParseOptions{Reason: HardBounce, Source: "import:bounces.csv"})
	require.NoError(t, err)
	require.Len(t, es, 1)
	assert.Equal(t, Entry{Address: "a@example.com", Scope: ScopeAll, Reason: HardBounce, Source: "import:bounces.csv", CreatedAt: time.Unix(1700000000, 0).UTC()}, es[0])

	ses := `{"SuppressedDestinationSummaries":[{"EmailAddress":"b@example.com","Reason":"COMPLAINT","LastUpdateTime":"2026-11-01T10:00:00Z"},{"EmailAddress":"c@example.com","Reason":"BOUNCE","LastUpdateTime":"2026-11-02T10:00:00Z"}]}`
	es, err = Parse(strings.NewReader(ses), JSON, ParseOptions{})
	require.NoError(t, err)
	require.Len(t, es, 2)
	assert.Equal(t, Complaint, es[0].Reason)
	assert.Equal(t, HardBounce, es[1].Reason)

	_, err = Parse(strings.NewReader("email\nok@example.com\nbroken\n"), CSV, ParseOptions{})
	require.ErrorContains(t, err, "line 3")
	_, err = Parse(strings.NewReader(`[{"email":"x@example.com","created":"yesterday"}]`), JSON, ParseOptions{})
	require.ErrorContains(t, err, "record 1")
}

// CountByReason counts the entries in force for a lane by reason, up to
// its cap.
func TestCountByReason(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		l := openList(t, s)
		now := time.Now()
		for i := range 5 {
			_, err := l.Add(ctx, Entry{Address: fmt.Sprintf("b%d@example.com", i), Reason: HardBounce})
			require.NoError(t, err)
		}
		for _, e := range []Entry{
			{Address: "c@example.com", Reason: Complaint},
			{Address: "u@example.com", Scope: "news", Reason: Unsubscribe},
			{Address: "v@example.com", Scope: "other", Reason: Unsubscribe},
			{Address: "x@example.com", Reason: Manual, CreatedAt: now.Add(-2 * time.Hour), ExpiresAt: now.Add(-time.Hour)},
		} {
			_, err := l.Add(ctx, e)
			require.NoError(t, err)
		}
		got, err := l.CountByReason(ctx, "news", 0)
		require.NoError(t, err)
		assert.Equal(t, []ReasonCount{{Reason: HardBounce, Count: 5}, {Reason: Complaint, Count: 1}, {Reason: Unsubscribe, Count: 1}}, got)
		got, err = l.CountByReason(ctx, "news", 3)
		require.NoError(t, err)
		assert.Equal(t, []ReasonCount{{Reason: HardBounce, Count: 3, AtLeast: true}, {Reason: Complaint, Count: 1}, {Reason: Unsubscribe, Count: 1}}, got)
		_, err = l.CountByReason(ctx, "Bad Lane", 0)
		assert.Error(t, err)
	})
}

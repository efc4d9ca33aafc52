package queue

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mailspool/mailspool/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The spellings of victim@example.com that were each a new recipient,
// passed a 1/1h recipient limit and were delivered to the same mailbox:
// each is now refused as invalid or counted as the same recipient, and
// list --to finds the mail under any of them.
func TestOneMailboxIsOneAddress(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		q := newQueue(t, s.db, Lane{RecipientLimit: Limit{N: 1, Per: time.Hour}}, newManualClock())
		id, err := q.Enqueue(ctx, s.db, testMessage("victim@ＥＸＡＭＰＬＥ.com"))
		require.NoError(t, err)

		for _, to := range []string{
			"victim@ex\u200Bample.com", // zero-width space
			"victim@ex\u00ADample.com", // soft hyphen
			"victim@\uFEFFexample.com", // byte-order mark
		} {
			_, err := q.Enqueue(ctx, s.db, testMessage(to))
			require.ErrorIs(t, err, transport.ErrInvalidMessage, "%+q", to)
			assert.Contains(t, err.Error(), "invisible format character", "%+q", to)
		}
		for _, to := range []string{
			"victim@example.com",
			"Victim@EXAMPLE.COM",
			"victim@ｅｘａｍｐｌｅ.com",
			"victim@example\u3002com",
		} {
			_, err := q.Enqueue(ctx, s.db, testMessage(to))
			require.ErrorIs(t, err, ErrRateLimited, "%+q is the same recipient", to)
		}
		assert.Equal(t, 1, countRows(t, s.db, q.table, "1=1"), "rows")

		row, err := q.Row(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, "victim@example.com", row.To, "the stored address has its domain normalized")

		for _, to := range []string{"victim@example.com", "VICTIM@example\uFF0Ecom", "victim@ｅｘａｍｐｌｅ.com"} {
			rows, err := q.List(ctx, ListOptions{Filter: Filter{To: to}})
			require.NoError(t, err, to)
			require.Len(t, rows, 1, "list --to %+q", to)
			assert.Equal(t, id, rows[0].ID)
		}
		_, err = q.List(ctx, ListOptions{Filter: Filter{To: "victim@ex\u200Bample.com"}})
		require.Error(t, err, "a filter with a format character is refused, not an empty list")
	})
}

// An internationalized domain is one mailbox whether it is given as
// U-label or A-label, in any case.
func TestIDNSpellingsAreOneRecipient(t *testing.T) {
	t.Parallel()
	s := newSQLiteStore(t)
	ctx := context.Background()
	q := newQueue(t, s.db, Lane{RecipientLimit: Limit{N: 1, Per: time.Hour}}, newManualClock())
	_, err := q.Enqueue(ctx, s.db, testMessage("ann@BÜCHER.example"))
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, s.db, testMessage("ann@xn--bcher-kva.example"))
	require.ErrorIs(t, err, ErrRateLimited)
	_, err = q.Enqueue(ctx, s.db, testMessage("ann@bu\u0308cher.example")) // not NFC
	require.ErrorIs(t, err, ErrRateLimited)
	_, err = q.Enqueue(ctx, s.db, testMessage("ann@exa\u2488mple.com")) // disallowed in IDNA 2008
	require.ErrorIs(t, err, transport.ErrInvalidMessage)
}

// TestRecipientIdempotencyKeyIsPerMailbox: RecipientIdempotencyKey queues
// one mail per scope and mailbox whatever the spelling of the address (case
// of either part, fullwidth letters, an ideographic full stop, the A-label
// of an IDN), each later enqueue reporting the first row's id as a
// duplicate; another scope or another mailbox queues anew. An opaque
// IdempotencyKey is compared as written. A scope with a control character,
// or given beside a key, is refused.
func TestRecipientIdempotencyKeyIsPerMailbox(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		q := newQueue(t, s.db, Lane{}, newManualClock())
		enqueue := func(to string, opts ...Option) (int64, bool) {
			t.Helper()
			var dup bool
			id, err := q.Enqueue(ctx, s.db, testMessage(to), append(opts, ReportDuplicate(&dup))...)
			require.NoError(t, err, to)
			return id, dup
		}
		first, dup := enqueue("Victim@Example.com", RecipientIdempotencyKey("invite-42"))
		require.False(t, dup)
		for _, to := range []string{"victim@example.com", "VICTIM@ＥＸＡＭＰＬＥ.COM", "victim@example\u3002com"} {
			id, dup := enqueue(to, RecipientIdempotencyKey("invite-42"))
			assert.True(t, dup, "%+q is the same mailbox", to)
			assert.Equal(t, first, id, "%+q", to)
		}
		idn, dup := enqueue("anna@bücher.example", RecipientIdempotencyKey("invite-42"))
		require.False(t, dup)
		id, dup := enqueue("ANNA@xn--bcher-kva.example", RecipientIdempotencyKey("invite-42"))
		assert.True(t, dup, "the A-label is the same domain")
		assert.Equal(t, idn, id)
		_, dup = enqueue("victim@example.com", RecipientIdempotencyKey("invite-43"))
		assert.False(t, dup, "another scope")
		_, dup = enqueue("other@example.com", RecipientIdempotencyKey("invite-42"))
		assert.False(t, dup, "another mailbox")
		long := strings.Repeat("a", 64) + "@" + strings.Repeat("b", 60) + "." + strings.Repeat("c", 60) + ".example"
		lid, dup := enqueue(long, RecipientIdempotencyKey("invite-42"))
		require.False(t, dup)
		id, dup = enqueue(strings.ToUpper(long), RecipientIdempotencyKey("invite-42"))
		assert.True(t, dup, "a key too long for the column is hashed, the same for every spelling")
		assert.Equal(t, lid, id)
		assert.Equal(t, 5, countRows(t, s.db, q.table, "1=1"), "rows")

		_, dup = enqueue("a@example.com", IdempotencyKey("Order-1"))
		require.False(t, dup)
		_, dup = enqueue("a@example.com", IdempotencyKey("order-1"))
		assert.False(t, dup, "an opaque key is compared as written")

		_, err := q.Enqueue(ctx, s.db, testMessage("a@example.com"), RecipientIdempotencyKey("bad\x1b[2J"))
		require.ErrorIs(t, err, ErrInvalid)
		_, err = q.Enqueue(ctx, s.db, testMessage("a@example.com"), RecipientIdempotencyKey("x"), IdempotencyKey("y"))
		require.ErrorIs(t, err, ErrInvalid)
		assert.Equal(t, 7, countRows(t, s.db, q.table, "1=1"), "rows")
	})
}

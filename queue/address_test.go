package queue

import (
	"context"
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

package queue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNewChecksThePostgresHandle: a handle whose connections wait for a
// lock without limit (the server's default lock_timeout=0) is refused with
// a hint; dburl's handle, which bounds the wait, is accepted.
func TestNewChecksThePostgresHandle(t *testing.T) {
	t.Parallel()
	s := newPostgresStore(t)
	ctx := context.Background()
	_, err := New(ctx, s.openWith(t, "lock_timeout=0"), Lane{}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lock_timeout=0")
	assert.Contains(t, err.Error(), "dburl.Open")
	_, err = New(ctx, s.db, Lane{}, nil)
	require.NoError(t, err)
}

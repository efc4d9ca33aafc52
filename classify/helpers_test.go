package classify

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailspool/mailspool/transport"
)

// want is the expected classification of one case; [accepted] means nil
// (success). Detail is compared only when set.
type want struct {
	kind     transport.Kind
	code     int
	enhanced string
	retry    time.Duration
	detail   string
}

// check asserts that err is classified as w says.
func check(t *testing.T, w want, err error) *transport.Error {
	t.Helper()
	if w == accepted {
		require.NoError(t, err)
		return nil
	}
	var te *transport.Error
	require.True(t, errors.As(err, &te), "want a *transport.Error, got %T %v", err, err)
	require.Equal(t, w.kind, transport.KindOf(err), "kind of %v", err)
	require.Equal(t, w.code, te.Code, "code of %v", err)
	require.Equal(t, w.enhanced, te.Enhanced, "enhanced code of %v", err)
	require.Equal(t, w.retry, te.RetryAfter, "retry of %v", err)
	if w.detail != "" {
		require.Equal(t, w.detail, te.Detail)
	}
	return te
}

// accepted is the want of a success: a nil error.
var accepted = want{kind: transport.Sent}

const (
	recipient = transport.ScopeRecipient
	message   = transport.ScopeMessage
	sender    = transport.ScopeSender
	transient = transport.ScopeTransient
	lane      = transport.ScopeLane
)

const (
	temporary  = transport.Temporary
	permanent  = transport.Permanent
	connection = transport.Connection
)

// asError returns the *transport.Error in err's chain, or nil.
func asError(err error) *transport.Error {
	var te *transport.Error
	if errors.As(err, &te) {
		return te
	}
	return nil
}

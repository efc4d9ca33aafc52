package verp

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAddressRoundTrip(t *testing.T) {
	s, err := New(bytes.Repeat([]byte{7}, 32), "Bounces.Example.COM.")
	require.NoError(t, err)
	a, err := s.Address("news", 12345)
	require.NoError(t, err)
	assert.Regexp(t, `^bounces\+news\.12345\.[a-z2-7]{10}@bounces\.example\.com$`, a)
	local, _, _ := strings.Cut(a, "@")
	assert.LessOrEqual(t, len(local), 64)

	lane, id, ok := s.Parse(strings.ToUpper(a)) // relays may change the case
	require.True(t, ok)
	assert.Equal(t, "news", lane)
	assert.Equal(t, int64(12345), id)

	long := strings.Repeat("a", MaxLane)
	a, err = s.Address(long, 1<<62)
	require.NoError(t, err)
	local, _, _ = strings.Cut(a, "@")
	assert.LessOrEqual(t, len(local), 64)
	_, err = s.Address(long+"a", 1)
	require.ErrorIs(t, err, ErrLane)
}

func TestParseRefusesForgeries(t *testing.T) {
	s, err := New(bytes.Repeat([]byte{7}, 32), "bounces.example.com")
	require.NoError(t, err)
	other, err := New(bytes.Repeat([]byte{8}, 32), "bounces.example.com")
	require.NoError(t, err)
	good, err := s.Address("news", 42)
	require.NoError(t, err)
	forged, err := other.Address("news", 42)
	require.NoError(t, err)
	local, _, _ := strings.Cut(good, "@")
	mac := local[strings.LastIndexByte(local, '.')+1:]
	for _, a := range []string{
		forged,
		strings.Replace(good, ".42.", ".43.", 1), // another mail, same mac
		strings.Replace(good, "+news.", "+newz.", 1), // another lane
		strings.Replace(good, ".42.", ".042.", 1),    // the same number spelt otherwise
		strings.Replace(good, "example.com", "example.org", 1),
		"bounces+news.42." + mac[:9] + "@bounces.example.com",
		"bounces+news.42@bounces.example.com",
		"postmaster@bounces.example.com",
		"",
	} {
		_, _, ok := s.Parse(a)
		assert.False(t, ok, a)
	}
	_, err = New([]byte("short"), "bounces.example.com")
	assert.Error(t, err)
	_, err = New(bytes.Repeat([]byte{7}, 32), "not a domain")
	assert.Error(t, err)
}

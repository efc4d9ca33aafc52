package smtp

import (
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPeek looks at one end of a loopback connection while the other end
// stays quiet, writes, and closes; the look takes nothing from the socket.
func TestPeek(t *testing.T) {
	switch runtime.GOOS {
	case "linux", "darwin", "freebsd", "netbsd", "openbsd", "dragonfly":
	default:
		assert.Equal(t, unknown, peek(nil), "peek on a system without the look")
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer client.Close()
	server, err := ln.Accept()
	require.NoError(t, err)
	defer server.Close()

	assert.Equal(t, open, peek(client), "quiet connection")
	_, err = server.Write([]byte("421 bye\r\n"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return peek(client) != open }, 5*time.Second, time.Millisecond, "the written line never showed")
	assert.Equal(t, unknown, peek(client), "bytes waiting")
	assert.Equal(t, unknown, peek(client), "bytes still waiting: the look took them")
	buf := make([]byte, 16)
	require.NoError(t, client.SetReadDeadline(time.Now().Add(5*time.Second)))
	n, err := client.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "421 bye\r\n", string(buf[:n]), "what the connection reads after the looks")
	require.NoError(t, server.Close())
	require.Eventually(t, func() bool { return peek(client) != open }, 5*time.Second, time.Millisecond, "the close never showed")
	assert.Equal(t, gone, peek(client), "closed by the other end")
	require.NoError(t, client.Close())
	assert.Equal(t, gone, peek(client), "closed here")
}

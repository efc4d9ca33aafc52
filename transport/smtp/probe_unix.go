//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package smtp

import (
	"errors"
	"net"
	"syscall"
)

// peek looks at the socket under c without blocking and without taking
// anything from it: one recv with MSG_PEEK on the non-blocking descriptor.
// Nothing to read means the connection is idle and open (the server has
// not closed it); end of stream or an error means it is gone; bytes
// waiting mean the server said something unasked, most often a 421 before
// it hung up, which only a reply can tell apart from anything harmless.
func peek(c net.Conn) idleState {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return unknown
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return gone
	}
	state := unknown
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK):
			state = open
		case err != nil, n == 0:
			state = gone
		default:
			state = unknown
		}
		return true // never wait for the socket to become readable
	})
	if err != nil {
		return gone
	}
	return state
}

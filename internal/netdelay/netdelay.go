// Package netdelay makes a loopback connection behave like one over a
// network path: what one side writes reaches the other a fixed time later.
// The benchmark's SMTP server and the SMTP adapter's tests use it to give
// a relay a round trip.
package netdelay

import (
	"bytes"
	"net"
	"sync"
	"time"
)

// Conn delivers what is written to it d after each Write, in order,
// without holding up the writer: the one-way delay of a network path.
// Reads are not delayed, so a peer that answers each write sees a round
// trip of d. Close delivers what is still due, then closes.
type Conn struct {
	net.Conn
	d    time.Duration
	out  chan chunk
	done chan struct{} // closed when the delivering goroutine ends

	mu     sync.Mutex
	closed bool
}

type chunk struct {
	due time.Time
	b   []byte
}

// Wrap returns c with its writes delayed by d.
func Wrap(c net.Conn, d time.Duration) *Conn {
	l := &Conn{Conn: c, d: d, out: make(chan chunk, 1024), done: make(chan struct{})}
	go l.deliver()
	return l
}

func (l *Conn) deliver() {
	defer close(l.done)
	for ch := range l.out {
		time.Sleep(time.Until(ch.due))
		if _, err := l.Conn.Write(ch.b); err != nil {
			for range l.out { // drop the rest; writers must not block
			}
			return
		}
	}
}

// Write queues p for delivery d from now. It fails only after Close; an
// error delivering it shows as the peer's missing data, as on a network.
func (l *Conn) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, net.ErrClosed
	}
	l.out <- chunk{due: time.Now().Add(l.d), b: bytes.Clone(p)}
	return len(p), nil
}

// Close delivers what is still due, then closes the connection.
func (l *Conn) Close() error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.out)
	}
	l.mu.Unlock()
	<-l.done
	return l.Conn.Close()
}

// Listener delays the writes of every connection it accepts by D.
type Listener struct {
	net.Listener
	D time.Duration
}

// Accept returns the next connection, its writes delayed by D.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Wrap(c, l.D), nil
}

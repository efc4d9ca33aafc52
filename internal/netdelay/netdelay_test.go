package netdelay

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestWritesArriveLateInOrderWithoutHoldingUpTheWriter: three writes made
// at once arrive in order, none before d has passed, and return before
// anything was delivered (net.Pipe's writes block until the peer reads, and
// the peer starts reading only after them); Close delivers what was still
// due.
func TestWritesArriveLateInOrderWithoutHoldingUpTheWriter(t *testing.T) {
	const d = 200 * time.Millisecond
	a, b := net.Pipe()
	defer b.Close()
	c := Wrap(a, d)
	start := time.Now()
	for _, s := range []string{"one ", "two ", "three"} {
		if _, err := c.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan string, 1)
	go func() {
		all, _ := io.ReadAll(b)
		got <- string(all)
	}()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "one two three" {
		t.Fatalf("the peer read %q, want the writes in order", s)
	}
	if took := time.Since(start); took < d {
		t.Fatalf("the writes arrived after %v, before the delay of %v", took, d)
	}
	if _, err := c.Write([]byte("late")); err == nil {
		t.Fatal("Write after Close succeeded")
	}
}

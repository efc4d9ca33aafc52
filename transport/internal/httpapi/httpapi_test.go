package httpapi

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentRequestsKeepTheirConnections: an adapter talks to one
// host, with as many requests at once as the worker's send concurrency.
// Over HTTP/1.1 (an API, or a proxy before it, without HTTP/2) each
// connection must stay open for the next request, not only the two that
// net/http keeps idle per host by default: a connection closed after each
// answer is a new TCP and TLS handshake for the next request.
func TestConcurrentRequestsKeepTheirConnections(t *testing.T) {
	const senders, rounds = 16, 5
	for _, tc := range []struct {
		name string
		base *http.Transport
	}{
		{"default transport", nil},
		{"a transport of the caller's (the AWS SDK keeps 10 idle per host)", &http.Transport{MaxIdleConns: 100, MaxIdleConnsPerHost: 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each round's requests are answered only once all of them
			// have arrived: every round needs senders connections at once,
			// and the first round opens exactly that many.
			var barrier atomic.Pointer[sync.WaitGroup]
			var conns atomic.Int32
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				b := barrier.Load()
				b.Done()
				all := make(chan struct{})
				go func() { b.Wait(); close(all) }()
				select {
				case <-all:
					w.WriteHeader(http.StatusAccepted)
				case <-time.After(10 * time.Second):
					w.WriteHeader(http.StatusServiceUnavailable)
				}
			}))
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					conns.Add(1)
				}
			}
			srv.Start()
			defer srv.Close()
			c := NewClient(tc.base)
			defer c.Close()
			for round := range rounds {
				b := new(sync.WaitGroup)
				b.Add(senders)
				barrier.Store(b)
				var wg sync.WaitGroup
				for range senders {
					wg.Go(func() {
						req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, strings.NewReader("{}"))
						if err != nil {
							t.Error(err)
							return
						}
						resp, err := c.HTTP.Do(req)
						if err != nil {
							t.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						_ = resp.Body.Close()
						if resp.StatusCode != http.StatusAccepted {
							t.Errorf("round %d: status %d: the round's requests never were all in flight at once", round, resp.StatusCode)
						}
					})
				}
				wg.Wait()
			}
			if n := int(conns.Load()); n != senders {
				t.Errorf("%d connections for %d rounds of %d requests at once: want %d, each kept for the next round", n, rounds, senders, senders)
			}
		})
	}
}

package admin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves the admin endpoints:
//
//	GET /metrics   the metrics of g in the Prometheus text format
//	GET /healthz   200 "ok" while h.Check passes, else 503 with the reason;
//	               200 "degraded" and a line per paused lane (h.Degraded)
//	               while it passes with a lane paused by an operator
func Handler(g prometheus.Gatherer, h *Health) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := h.Check(r.Context()); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, err)
			return
		}
		if d := h.Degraded(); len(d) > 0 {
			fmt.Fprintln(w, "degraded")
			for _, line := range d {
				fmt.Fprintln(w, line)
			}
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// Server is a running admin listener.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// Listen starts serving handler on addr (host:port; bind it to loopback or
// an internal interface: the endpoints have no authentication). It fails
// at once when addr cannot be bound.
func Listen(addr string, handler http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin: listen on %s: %w", addr, err)
	}
	s := &Server{
		srv:  &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute},
		ln:   ln,
		done: make(chan error, 1),
	}
	go func() {
		err := s.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	return s, nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Shutdown stops accepting connections and waits for requests in progress,
// up to ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if serveErr := <-s.done; err == nil {
		err = serveErr
	}
	return err
}

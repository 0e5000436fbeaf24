package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// metricsServer serves GET /metrics on a listener of its own (METRICS_ADDR),
// so that the scrape can be kept off the public port: reachable by the
// Prometheus of the cluster, not by the callers of the API.
type metricsServer struct {
	srv   *http.Server
	log   *slog.Logger
	close bool // the naive variant: Close instead of Shutdown (tests)
	once  sync.Once
}

// serveMetrics listens on addr and serves handler at /metrics (anything else
// is 404), with the same header and idle timeouts as the API.
func serveMetrics(addr string, handler http.Handler, log *slog.Logger, h serveHooks) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on METRICS_ADDR %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", handler)
	m := &metricsServer{
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 5 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       120 * time.Second,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		log:   log,
		close: h.closeMetrics,
	}
	log.Info("serving metrics", "addr", ln.Addr().String())
	if h.metricsListening != nil {
		h.metricsListening <- ln.Addr().String()
	}
	go func() {
		if err := m.srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			log.Error("metrics listener failed", "err", err)
		}
	}()
	return m, nil
}

// stop closes the listener and waits, until ctx ends or timeout passes, for
// the scrapes in progress to get their answers. Later calls do nothing.
func (m *metricsServer) stop(ctx context.Context, timeout time.Duration) {
	m.once.Do(func() {
		if m.close {
			_ = m.srv.Close()
			return
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if err := m.srv.Shutdown(ctx); err != nil {
			m.log.Warn("metrics listener: a scrape did not finish before the shutdown deadline", "err", err)
		}
	})
}

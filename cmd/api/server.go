package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ordersvc/ordersvc/internal/httpapi"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
	"github.com/ordersvc/ordersvc/internal/infra/store"
)

// server is `api serve` (ADR 0027). It owns the pools, the listeners (the
// API's HTTP_ADDR, METRICS_ADDR's and PPROF_ADDR's), the background workers
// (outbox dispatcher, idempotency purge, outbox retention, and the schema
// gate's rechecks) and the order they stop in:
//
//   - newServer opens what serving needs: tracing, the pool, the replica's
//     pool, the metrics registry, the schema gate and the HTTP handler;
//   - Start looks at the schema once, binds the listeners and starts the
//     workers and the API;
//   - Shutdown stops them: /readyz answers 503 for SHUTDOWN_DRAIN while
//     requests are still served, the listener closes, every request already
//     received gets its response within SHUTDOWN_TIMEOUT (see connTracker),
//     the workers stop, then the metrics listener, the spans still queued
//     are exported (with tracing on) and the pools close, in that order.
//
// What newServer and Start acquire is released last first, also when they
// fail half way (release).
type server struct {
	cfg   config
	log   *slog.Logger
	hooks serveHooks

	traces *tracing
	pool   *postgres.Pool
	runner *store.Runner
	reg    *prometheus.Registry
	gate   *schemaGate
	conns  *connTracker
	http   *http.Server
	api    *httpapi.Server
	// draining makes /readyz answer 503 (step 1 of the stop sequence).
	draining atomic.Bool

	ln          net.Listener
	metrics     *metricsServer
	stopWorkers context.CancelFunc
	workersDone <-chan struct{}
	// failed receives the API listener's error when it stops serving by
	// itself.
	failed chan error

	// closers release what newServer and Start acquired, last first.
	closers []func()
}

// newServer opens what the server needs; on an error it releases what it
// had opened. ctx bounds the opening only.
func newServer(ctx context.Context, c config, log *slog.Logger, h serveHooks) (_ *server, err error) {
	s := &server{cfg: c, log: log, hooks: h, conns: newConnTracker(), failed: make(chan error, 1)}
	defer func() {
		if err != nil {
			s.release()
		}
	}()
	if err := s.openDatabase(ctx); err != nil {
		return nil, err
	}
	build := readBuildInfo()
	log.Info("starting", "version", build.Version, "revision", build.Revision, "goversion", build.GoVersion)
	s.reg = prometheus.NewRegistry()
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), build.collector())
	s.reg.MustRegister(h.collectors...)
	s.runner = newRunner(s.pool, log, s.reg, c)
	postgres.RegisterPoolMetrics(s.reg, s.pool)
	reader, closeReplica, err := openReader(ctx, c, s.runner, log, s.reg, s.traces.provider())
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, closeReplica)
	if s.gate, err = newSchemaGate(s.pool.Pool, log, time.Second); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() { _ = s.gate.db.Close() })
	s.api = newHandler(s.runner, reader, s.ready, s.gate.err, log, s.reg, c, s.traces.provider())
	s.http = &http.Server{
		Handler:           s.conns.closeConnections(s.api),
		ConnState:         s.conns.connState,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// openDatabase starts tracing and opens the pool. The spans are flushed
// before the pool closes, on every path.
func (s *server) openDatabase(ctx context.Context) error {
	traces, err := newTracing(ctx, s.cfg, s.log, s.hooks.spanProcessors...)
	if err != nil {
		return err
	}
	s.traces = traces
	s.pool, err = openPool(ctx, s.cfg, "serve", traces.provider())
	if err != nil {
		traces.shutdown(ctx, s.log)
		return err
	}
	s.closers = append(s.closers, s.pool.Close, func() { traces.shutdown(context.WithoutCancel(ctx), s.log) })
	return nil
}

// ready is /readyz: 503 while draining or while the schema is behind,
// otherwise whether the database answers.
func (s *server) ready(ctx context.Context) error {
	if s.draining.Load() {
		return httpapi.ErrShuttingDown
	}
	if err := s.gate.err(); err != nil {
		return err
	}
	return s.runner.Ping(ctx)
}

// Start looks at the schema, binds the listeners, and starts the workers
// and the API; it returns once they run. The schema gate's rechecks stop
// when ctx ends; the workers only when Shutdown stops them. On an error it
// releases everything.
func (s *server) Start(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			s.release()
		}
	}()
	s.startGate(ctx)
	if err := s.listen(); err != nil {
		return err
	}
	if err := s.startSideListeners(); err != nil {
		return err
	}
	workers, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	s.stopWorkers = stopWorkers
	s.closers = append(s.closers, stopWorkers)
	s.workersDone = startWorkers(workers, s.pool, s.log, s.reg, s.cfg, s.traces.provider())
	go func() { s.failed <- s.http.Serve(s.ln) }()
	return nil
}

// Addr is the address the API listens on, once started.
func (s *server) Addr() string { return s.ln.Addr().String() }

// startGate looks at the schema once and, while it is behind, again every
// second until it is there or ctx ends (schemaGate).
func (s *server) startGate(ctx context.Context) {
	if s.hooks.noSchemaGate {
		s.gate.behind.Store(nil)
		return
	}
	if s.gate.check(ctx) {
		return
	}
	gctx, stopGate := context.WithCancel(ctx)
	s.closers = append(s.closers, stopGate)
	go s.gate.run(gctx)
}

// listen binds HTTP_ADDR, inside the connection tracker.
func (s *server) listen() error {
	ln, err := net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on HTTP_ADDR %s: %w", s.cfg.HTTPAddr, err)
	}
	if s.hooks.wrapListener != nil {
		ln = s.hooks.wrapListener(ln)
	}
	s.ln = s.conns.listen(ln)
	s.closers = append(s.closers, func() { _ = s.ln.Close() })
	s.log.Info("listening", "addr", s.ln.Addr().String())
	if s.cfg.BenchDisableIdempotency {
		s.log.Warn("BENCH_DISABLE_IDEMPOTENCY is set: no idempotency record is kept, retries run again (duplicate orders); benchmarks only")
	}
	return nil
}

// startSideListeners serves PPROF_ADDR and METRICS_ADDR when they are set.
func (s *server) startSideListeners() error {
	if s.cfg.PprofAddr != "" {
		stopPprof, err := servePprof(s.cfg.PprofAddr, s.log)
		if err != nil {
			return err
		}
		s.closers = append(s.closers, stopPprof)
	}
	if s.cfg.MetricsAddr == "" {
		return nil
	}
	metrics, err := serveMetrics(s.cfg.MetricsAddr, s.api.Metrics(), s.log, s.hooks)
	if err != nil {
		return err
	}
	s.metrics = metrics
	s.closers = append(s.closers, func() { metrics.stop(context.Background(), s.cfg.ShutdownTimeout) })
	return nil
}

// Shutdown runs the stop sequence (see server and connTracker) and releases
// everything. ctx bounds it, on top of SHUTDOWN_TIMEOUT. It returns
// http.Server.Shutdown's error when a request was still unanswered at the
// deadline (logged too).
func (s *server) Shutdown(ctx context.Context) error {
	s.drain()
	s.log.Info("shutting down", "timeout", s.cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(ctx, s.cfg.ShutdownTimeout)
	defer cancel()
	err := s.stopAPI(sctx)
	s.stopWorkers()
	select {
	case <-s.workersDone:
	case <-sctx.Done():
		s.log.Warn("workers did not stop before the shutdown deadline")
	}
	// The metrics listener stops after the workers: a scrape during the
	// stop sequence still answers, and one in progress gets its answer.
	if s.metrics != nil {
		s.metrics.stop(sctx, s.cfg.ShutdownTimeout)
	}
	s.traces.shutdown(sctx, s.log)
	s.log.Info("stopped")
	s.release()
	return err
}

// drain is step 1: /readyz answers 503 for SHUTDOWN_DRAIN, everything else
// is served as usual.
func (s *server) drain() {
	s.draining.Store(true)
	s.log.Info("draining: /readyz answers 503", "drain", s.cfg.ShutdownDrain)
	s.hooks.call(s.hooks.draining)
	if s.cfg.ShutdownDrain > 0 {
		time.Sleep(s.cfg.ShutdownDrain)
	}
}

// stopAPI is steps 2 and 3: the listener closes and idle connections get
// their grace (connTracker), then http.Server.Shutdown waits for the
// requests in progress.
func (s *server) stopAPI(ctx context.Context) error {
	if !s.hooks.plainShutdown {
		graceEnd := s.conns.beginClosing(s.ln)
		s.hooks.call(s.hooks.closing)
		time.Sleep(time.Until(graceEnd))
	}
	err := s.http.Shutdown(ctx)
	if err != nil {
		s.log.Warn("shutdown did not drain every request", "err", err)
	}
	s.hooks.call(s.hooks.shutDown)
	return err
}

// release runs the closers, last first, once.
func (s *server) release() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

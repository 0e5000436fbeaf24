package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/httpapi"
	"github.com/ordersvc/ordersvc/internal/infra/maintenance"
	"github.com/ordersvc/ordersvc/internal/infra/outbox"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
	"github.com/ordersvc/ordersvc/internal/infra/store"
)

const usage = `usage: api <command>

commands:
  serve                         run the HTTP server and background workers
  migrate up|down|status        apply, roll back one, or list migrations
  actor create --name NAME --role customer|staff [--credit-limit-cents N]
                                create an actor and print {"actor_id","token"}
  outbox dead                   list dead outbox events, one JSON object a line
  outbox requeue ID|--all       make dead outbox events deliverable again
  check                         report every stale derived value (e.g. a balance that
                                differs from its orders), one line each; exit 1 if any
  seed                          create demo actors and products, print tokens
  healthcheck                   exit 0 when the local server is ready (for images without curl)

api COMMAND --help prints the usage of one command;
configuration is read from the environment; see README.md`

// run is the whole program: main only wires the process to it, so tests can
// call it with their own arguments, environment and output.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	if wantsHelp(args[1:]) {
		if ok, err := printCommandUsage(stdout, args[0]); ok {
			return err
		}
	}
	switch args[0] {
	case "serve":
		return serve(ctx, getenv, stdout, nil)
	case "migrate":
		return migrate(ctx, args[1:], getenv, stdout)
	case "actor":
		if len(args) < 2 || args[1] != "create" {
			return errors.New("usage: api actor create --name NAME --role customer|staff [--credit-limit-cents N]")
		}
		return actorCreate(ctx, args[2:], getenv, stdout)
	case "outbox":
		return outboxCommand(ctx, args[1:], getenv, stdout)
	case "check":
		return check(ctx, args[1:], getenv, stdout)
	case "seed":
		return seed(ctx, getenv, stdout)
	case "healthcheck":
		return healthcheck(ctx, getenv)
	case "help", "-h", "--help":
		_, err := fmt.Fprintln(stdout, usage)
		return err
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}

// openPool opens the pool with the configured guards and checks that the
// database answers, so that a bad DATABASE_URL fails at start with one line.
// Its connections announce role and the schema this binary was built for in
// application_name (postgres.Schema.Announcement). tp traces its round trips
// (serve, with tracing on); nil for none.
func openPool(ctx context.Context, c config, role string, tp trace.TracerProvider) (*postgres.Pool, error) {
	schema, err := postgres.EmbeddedSchema()
	if err != nil {
		return nil, err
	}
	pool, err := postgres.NewPool(ctx, postgres.PoolConfig{
		ApplicationName:  schema.Announcement(role),
		URL:              c.DatabaseURL,
		MaxConns:         c.DBMaxConns,
		StatementTimeout: c.DBStatementTimeout,
		LockTimeout:      c.DBLockTimeout,
		IdleInTxTimeout:  c.DBIdleInTxTimeout,
		ConnectTimeout:   3 * time.Second,
		TracerProvider:   tp,
	})
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		// pgx reports every address it tried on its own line; the operator
		// gets one line.
		return nil, fmt.Errorf("database unreachable: %s", strings.Join(strings.Fields(err.Error()), " "))
	}
	return pool, nil
}

func newRunner(pool *postgres.Pool, log *slog.Logger, reg prometheus.Registerer, c config) *store.Runner {
	return store.NewRunner(pool, log, reg, store.RetryPolicy{}, keyConfig(c))
}

// keyConfig is the idempotency store's configuration. The benchmark switch
// BENCH_DISABLE_IDEMPOTENCY wires a key store that keeps nothing: the HTTP
// layer and the use cases are unchanged (the header is still required and
// validated, so every 400 of the contract stays), but no record is claimed
// or stored, and a retry runs again.
func keyConfig(c config) store.KeyConfig {
	k := store.KeyConfig{TTL: c.IdempotencyTTL, Wait: c.IdempotencyWait, LockTimeout: c.DBLockTimeout}
	if c.BenchDisableIdempotency {
		k.Store = noKeys{}
	}
	return k
}

// noKeys is the key store of BENCH_DISABLE_IDEMPOTENCY (benchmarks only):
// every key is new and nothing is kept.
type noKeys struct{}

func (noKeys) Claim(context.Context, app.Key) (*app.Receipt, error) { return nil, nil }
func (noKeys) Complete(context.Context, app.Key, app.Receipt) error { return nil }

// newHandler wires the use cases to the HTTP API (the commands to runner and
// its key latch, the queries to reader); tp, when not nil, traces
// its requests. With METRICS_ADDR set, the API leaves /metrics to the
// listener of serveMetrics. admit refuses /v1 while the schema is behind
// (schemaGate).
func newHandler(runner *store.Runner, reader app.Reader, ready func(context.Context) error, admit func() error, log *slog.Logger, reg *prometheus.Registry, c config, tp trace.TracerProvider) *httpapi.Server {
	return httpapi.NewServer(httpapi.Deps{Log: log, Registry: reg, Ready: ready, Admit: admit, App: app.New(app.Deps{Transactor: runner, Reader: reader, Latch: runner}), RequestTimeout: c.RequestTimeout,
		TracerProvider: tp, MetricsElsewhere: c.MetricsAddr != ""})
}

// serve runs the HTTP server until ctx ends. Then /readyz answers 503 for
// SHUTDOWN_DRAIN while requests are still served, the listener closes, every
// request already received gets its response within SHUTDOWN_TIMEOUT (see
// connTracker), the workers stop, the spans still queued are exported (with
// tracing on) and the pool closes, in that order.
// listening, when set, receives the bound address (tests listen on :0); tests
// may pass hooks.
func serve(ctx context.Context, getenv func(string) string, stdout io.Writer, listening chan<- string, hooks ...serveHooks) error {
	var h serveHooks
	if len(hooks) > 0 {
		h = hooks[0]
	}
	c, err := loadConfig(getenv, true)
	if err != nil {
		return err
	}
	log := newLogger(stdout, c.LogLevel)
	traces, err := newTracing(ctx, c, log, h.spanProcessors...)
	if err != nil {
		return err
	}
	// Deferred calls run last in, first out: on an early return the spans
	// are flushed before the pool closes, as on the normal stop path.
	pool, err := openPool(ctx, c, "serve", traces.provider())
	if err != nil {
		traces.shutdown(ctx, log)
		return err
	}
	defer pool.Close()
	defer traces.shutdown(context.WithoutCancel(ctx), log)

	build := readBuildInfo()
	log.Info("starting", "version", build.Version, "revision", build.Revision, "goversion", build.GoVersion)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), build.collector())
	reg.MustRegister(h.collectors...)
	runner := newRunner(pool, log, reg, c)
	postgres.RegisterPoolMetrics(reg, pool)
	reader, closeReplica, err := openReader(ctx, c, runner, log, reg, traces.provider())
	if err != nil {
		return err
	}
	defer closeReplica()

	gate, err := newSchemaGate(pool.Pool, log, time.Second)
	if err != nil {
		return err
	}
	defer gate.db.Close()
	if h.noSchemaGate {
		gate.behind.Store(nil)
	} else if !gate.check(ctx) {
		gctx, stopGate := context.WithCancel(ctx)
		defer stopGate()
		go gate.run(gctx)
	}

	ln, err := net.Listen("tcp", c.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on HTTP_ADDR %s: %w", c.HTTPAddr, err)
	}
	if h.wrapListener != nil {
		ln = h.wrapListener(ln)
	}
	conns := newConnTracker()
	ln = conns.listen(ln)
	var draining atomic.Bool
	ready := func(ctx context.Context) error {
		if draining.Load() {
			return httpapi.ErrShuttingDown
		}
		if err := gate.err(); err != nil {
			return err
		}
		return runner.Ping(ctx)
	}
	api := newHandler(runner, reader, ready, gate.err, log, reg, c, traces.provider())
	srv := &http.Server{
		Handler:           conns.closeConnections(api),
		ConnState:         conns.connState,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("listening", "addr", ln.Addr().String())
	if c.BenchDisableIdempotency {
		log.Warn("BENCH_DISABLE_IDEMPOTENCY is set: no idempotency record is kept, retries run again (duplicate orders); benchmarks only")
	}
	if c.PprofAddr != "" {
		stopPprof, err := servePprof(c.PprofAddr, log)
		if err != nil {
			return err
		}
		defer stopPprof()
	}
	var metrics *metricsServer
	if c.MetricsAddr != "" {
		metrics, err = serveMetrics(c.MetricsAddr, api.Metrics(), log, h)
		if err != nil {
			_ = ln.Close()
			return err
		}
		defer metrics.stop(context.WithoutCancel(ctx), c.ShutdownTimeout) // on an early return
	}
	if listening != nil {
		listening <- ln.Addr().String()
	}

	workers, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWorkers()
	done := startWorkers(workers, pool, log, reg, c, traces.provider())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	// The stop sequence (connTracker): drain, close, shut down.
	draining.Store(true)
	log.Info("draining: /readyz answers 503", "drain", c.ShutdownDrain)
	h.call(h.draining)
	if c.ShutdownDrain > 0 {
		time.Sleep(c.ShutdownDrain)
	}
	log.Info("shutting down", "timeout", c.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.ShutdownTimeout)
	defer cancel()
	if !h.plainShutdown {
		graceEnd := conns.beginClosing(ln)
		h.call(h.closing)
		time.Sleep(time.Until(graceEnd))
	}
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown did not drain every request", "err", err)
	}
	h.call(h.shutDown)
	stopWorkers()
	select {
	case <-done:
	case <-sctx.Done():
		log.Warn("workers did not stop before the shutdown deadline")
	}
	// The metrics listener stops after the workers: a scrape during the
	// stop sequence still answers, and one in progress gets its answer.
	if metrics != nil {
		metrics.stop(sctx, c.ShutdownTimeout)
	}
	traces.shutdown(sctx, log)
	log.Info("stopped")
	return nil
}

// serveHooks let tests hold the server at the steps of its stop sequence.
type serveHooks struct {
	// wrapListener wraps the listener (inside the connection tracker).
	wrapListener func(net.Listener) net.Listener
	// draining runs once /readyz answers 503, before SHUTDOWN_DRAIN is
	// waited out; closing once the listener is closed and idle connections
	// are on their grace; shutDown once http.Server.Shutdown returned.
	draining, closing, shutDown func()
	// plainShutdown skips the closing step: http.Server.Shutdown alone,
	// the naive variant that the shutdown tests must catch.
	plainShutdown bool
	// noSchemaGate serves whatever the schema: the naive variant that the
	// schema gate test must catch.
	noSchemaGate bool
	// spanProcessors see every span when tracing is on (tests record
	// spans with one); with tracing off there are no spans to see.
	spanProcessors []sdktrace.SpanProcessor
	// collectors are registered with the service's metrics (a test holds a
	// scrape in progress with one).
	collectors []prometheus.Collector
	// metricsListening receives the address of METRICS_ADDR's listener.
	metricsListening chan<- string
	// closeMetrics stops METRICS_ADDR's listener with http.Server.Close
	// instead of Shutdown: the naive variant that cuts a scrape in
	// progress, which the metrics listener's test must catch.
	closeMetrics bool
}

func (serveHooks) call(f func()) {
	if f != nil {
		f()
	}
}

// servePprof serves the runtime profiles on their own listener, never on the
// API's: they reveal internals and are for operators only (PPROF_ADDR).
func servePprof(addr string, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on PPROF_ADDR %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Warn("serving pprof", "addr", ln.Addr().String())
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }, nil
}

// runsDispatcher says whether this process delivers outbox events: only
// with OUTBOX_WEBHOOK_URL set, to a URL or to log. A replica started
// without it must not claim events it cannot deliver: it would mark them
// delivered and the receiver would never see them.
func runsDispatcher(c config) bool { return c.OutboxWebhookURL != "" || c.OutboxLogOnly }

// startWorkers starts the background workers, the outbox dispatcher (when
// runsDispatcher; its metrics are registered either way), the
// idempotency purge and the outbox retention, and returns a channel closed when all of them have
// stopped. They stop when ctx ends; the dispatcher first releases the events
// it holds. tp, when not nil, traces each delivery.
func startWorkers(ctx context.Context, pool *postgres.Pool, log *slog.Logger, reg prometheus.Registerer, c config, tp trace.TracerProvider) <-chan struct{} {
	oc := outboxConfig(c)
	oc.TracerProvider = tp
	dispatcher := outbox.NewDispatcher(pool, log, reg, oc)
	purger := maintenance.NewPurger(pool, log, reg, maintenance.PurgeConfig{Interval: c.CleanupInterval})
	retention := maintenance.NewOutboxRetention(pool, log, reg, maintenance.RetentionConfig{Retention: c.OutboxRetention, Interval: c.CleanupInterval})
	services := []maintenance.Service{purger, retention}
	if runsDispatcher(c) {
		services = append(services, dispatcher)
	} else {
		log.Warn("OUTBOX_WEBHOOK_URL is not set: this process runs no outbox dispatcher; events stay pending until a process with one delivers them (the backlog is in ordersvc_outbox_pending_events)")
	}
	return maintenance.Start(ctx, services...)
}

func migrate(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	const usageMigrate = "usage: api migrate up [--force-contract] | down | status"
	if len(args) == 0 || (args[0] != "up" && args[0] != "down" && args[0] != "status") {
		return errors.New(usageMigrate)
	}
	fl := flag.NewFlagSet("migrate "+args[0], flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	force := fl.Bool("force-contract", false, "apply contract migrations while older binaries are connected")
	if err := fl.Parse(args[1:]); err != nil || fl.NArg() > 0 || (*force && args[0] != "up") {
		return errors.New(usageMigrate)
	}
	c, err := loadConfig(getenv, true)
	if err != nil {
		return err
	}
	// MIGRATE_DATABASE_URL may go direct to PostgreSQL or through a
	// transaction pooler: goose's lock is a table row, not a session lock.
	c.DatabaseURL = c.MigrateDatabaseURL
	pool, err := openPool(ctx, c, "migrate", nil)
	if err != nil {
		return err
	}
	defer pool.Close()
	sqlDB := stdlib.OpenDBFromPool(pool.Pool)
	defer sqlDB.Close()
	p, err := postgres.NewMigrator(sqlDB)
	if err != nil {
		return err
	}
	switch args[0] {
	case "up":
		log := newLogger(stdout, c.LogLevel)
		res, err := postgres.MigrateUp(ctx, p, pool, postgres.MigrateOptions{ForceContract: *force, Log: log})
		for _, r := range res {
			fmt.Fprintf(stdout, "applied %s (%s)\n", r.Source.Path, r.Duration.Round(time.Millisecond))
		}
		if err == nil && len(res) == 0 {
			fmt.Fprintln(stdout, "no migrations to apply")
		}
		return err
	case "down":
		r, err := p.Down(ctx)
		if r != nil {
			fmt.Fprintf(stdout, "rolled back %s\n", r.Source.Path)
		}
		return err
	default:
		st, err := p.Status(ctx)
		s, serr := postgres.EmbeddedSchema()
		if serr != nil {
			return serr
		}
		for _, m := range st {
			applied := "pending"
			if m.State == goose.StateApplied {
				applied = "applied " + m.AppliedAt.UTC().Format(time.RFC3339)
			}
			if s.IsContract(m.Source.Version) {
				applied += " (contract)"
			}
			fmt.Fprintf(stdout, "%-40s %s\n", m.Source.Path, applied)
		}
		return err
	}
}

func actorCreate(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fl := flag.NewFlagSet("actor create", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	name := fl.String("name", "", "display name")
	role := fl.String("role", "", "customer or staff")
	limit := fl.Int64("credit-limit-cents", 0, "credit limit in cents (customers)")
	if err := fl.Parse(args); err != nil {
		return fmt.Errorf("actor create: %w (usage: --name NAME --role customer|staff [--credit-limit-cents N])", err)
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("actor create: unexpected argument %q", fl.Arg(0))
	}
	c, err := loadConfig(getenv, true)
	if err != nil {
		return err
	}
	pool, err := openPool(ctx, c, "actor", nil)
	if err != nil {
		return err
	}
	defer pool.Close()
	runner := newRunner(pool, newLogger(io.Discard, slog.LevelError), nil, c)
	out, err := app.CreateActor{Transactor: runner}.Handle(ctx, app.CreateActorCommand{Name: *name, Role: *role, CreditLimitCents: *limit})
	if err != nil {
		var de *domain.Error
		if errors.As(err, &de) {
			return fmt.Errorf("actor create: %s", de.Error())
		}
		return err
	}
	return json.NewEncoder(stdout).Encode(map[string]string{"actor_id": out.Actor.ID.String(), "token": out.Token})
}

func healthcheck(ctx context.Context, getenv func(string) string) error {
	c, err := loadConfig(getenv, false)
	if err != nil {
		return err
	}
	_, port, err := net.SplitHostPort(c.HTTPAddr)
	if err != nil {
		return fmt.Errorf("HTTP_ADDR %q: %w", c.HTTPAddr, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+port+"/readyz", nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: /readyz answered %d", res.StatusCode)
	}
	return nil
}

package testkit

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
	"github.com/ordersvc/ordersvc/internal/infra/store"
)

// Env is the service's core, in process: a database of its own, the pgx
// pool and transaction runner, and the use cases, with no HTTP. The tests of
// the HTTP API put the handler on top with httpkit.New.
type Env struct {
	T        testing.TB
	URL      string // database
	Pool     *postgres.Pool
	Runner   *store.Runner
	App      app.UseCases // as the service wires them (Options.Wrap applied)
	Registry *prometheus.Registry
	Log      *slog.Logger // the service's, into the test's output (Logger)
	Staff    Actor
	// Hooks holds the service's connections at named statements (Stop,
	// Interleave).
	Hooks *Hooks
	// Standby is the read replica the queries use (Options.ReplicaReads),
	// caught up when New returns; nil without one.
	Standby *Standby
	// Options are New's, with the defaults filled in.
	Options Options
}

// New starts the service's core on a fresh database and creates one staff
// actor.
func New(t testing.TB, opts ...Options) *Env {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	o = o.withDefaults()
	url := o.DatabaseURL
	if url == "" {
		url = DB(t)
	}
	ctx := context.Background()
	hooks := &Hooks{}
	pool, err := postgres.NewPool(ctx, postgres.PoolConfig{
		URL: url, MaxConns: o.MaxConns,
		StatementTimeout: 15 * time.Second, LockTimeout: o.LockTimeout, IdleInTxTimeout: 30 * time.Second,
		ConnectTimeout: 3 * time.Second, Tracer: hooks,
	})
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	log := Logger(t)
	reg := prometheus.NewRegistry()
	runner := store.NewRunner(pool, log, reg, store.RetryPolicy{MaxAttempts: 10}, store.KeyConfig{
		TTL: o.KeyTTL, Wait: o.KeyWait, LockTimeout: o.LockTimeout,
	})
	transactor, latch := o.transactor(runner)
	var reader app.Reader = runner
	var standby *Standby
	var plainReplica *store.Runner
	if o.ReplicaReads != NoReplica {
		reader, standby, plainReplica = o.replicaReader(t, url, runner, log, reg)
	}
	uc := app.New(app.Deps{Transactor: transactor, Reader: reader, Latch: latch})
	if plainReplica != nil {
		uc.Authenticate = app.Authenticate{Transactor: plainReplica, Cache: app.NewTokenCache(100_000)}
	}
	// Cleanups run last in, first out: held connections go on before the
	// pool waits for them.
	t.Cleanup(hooks.ReleaseAll)
	e := &Env{T: t, URL: url, Pool: pool, Runner: runner, App: uc, Registry: reg, Log: log, Hooks: hooks, Options: o}
	e.Staff = e.NewStaff()
	if standby != nil {
		e.Standby = standby
		standby.CatchUp(t)
	}
	return e
}

// Logger writes the service's logs into the test's output, warnings and up
// unless TEST_LOG_LEVEL says otherwise.
func Logger(t testing.TB) *slog.Logger {
	level := slog.LevelWarn
	if v := os.Getenv("TEST_LOG_LEVEL"); v != "" {
		_ = level.UnmarshalText([]byte(v))
	}
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
}

// Exec runs SQL on the test's database, for setup and for assertions.
func (e *Env) Exec(sql string, args ...any) {
	e.T.Helper()
	if _, err := e.Pool.Exec(context.Background(), sql, args...); err != nil {
		e.T.Fatalf("%s: %v", sql, err)
	}
}

// QueryInt runs a query that returns one integer.
func (e *Env) QueryInt(sql string, args ...any) int64 {
	e.T.Helper()
	var n int64
	if err := e.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.T.Fatalf("%s: %v", sql, err)
	}
	return n
}

// Metric returns the value of a counter or gauge in the service's registry,
// summed over the series whose labels include the given name, value pairs.
func (e *Env) Metric(name string, labels ...string) float64 {
	e.T.Helper()
	return Metric(e.T, e.Registry, name, labels...)
}

// Metric returns the value of a counter or gauge in reg, summed over the
// series whose labels include the given name, value pairs.
func Metric(t testing.TB, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m.GetLabel(), labels) {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// hasLabels reports whether pairs (a series' labels) include every name,
// value pair of labels.
func hasLabels[P labelPair](pairs []P, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		if !hasLabel(pairs, labels[i], labels[i+1]) {
			return false
		}
	}
	return true
}

func hasLabel[P labelPair](pairs []P, name, value string) bool {
	for _, lp := range pairs {
		if lp.GetName() == name && lp.GetValue() == value {
			return true
		}
	}
	return false
}

// labelPair is a series' label as the registry gathers it.
type labelPair interface {
	GetName() string
	GetValue() string
}

// Check runs what `api check` runs (store.Check) on the test's database and
// fails the test with one line per finding: every invariant and derived
// value must hold.
func (e *Env) Check() {
	e.T.Helper()
	for _, f := range e.Findings() {
		e.T.Errorf("api check: %s", f)
	}
}

// Findings returns what `api check` finds on the test's database, for a
// test that expects some.
func (e *Env) Findings() []store.Finding {
	e.T.Helper()
	findings, err := store.Check(context.Background(), e.Pool, store.CheckOptions{})
	if err != nil {
		e.T.Fatalf("api check: %v", err)
	}
	return findings
}

// CheckAtEnd runs Check when the test ends, after everything it started has
// finished: race and fault tests call it so that no derived value is left
// stale by what they did.
func (e *Env) CheckAtEnd() {
	e.T.Cleanup(e.Check)
}

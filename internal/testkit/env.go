package testkit

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// Options adjust an Env.
type Options struct {
	// Wrap replaces the transactor the use cases see, for example with a
	// deliberately naive variant that a race test must catch. The commands
	// keep the runner's key latch (unless NoKeyLatch); a wrapper that is an
	// app.KeyLatch too replaces it, for a naive variant of what happens
	// while a request waits on its key.
	Wrap func(app.Transactor) app.Transactor
	// KeyWait is IDEMPOTENCY_WAIT (default 10s; the service's is 5s).
	KeyWait time.Duration
	// KeyTTL is IDEMPOTENCY_TTL (default 24h).
	KeyTTL time.Duration
	// MaxConns sizes the pool (default 16).
	MaxConns int32
	// LockTimeout is DB_LOCK_TIMEOUT, the pool's lock_timeout (default 10s;
	// the service's is 3s).
	LockTimeout time.Duration
	// NoKeyLatch turns the in-process key latch off: duplicates of a
	// request then meet in the database, on the key's row, as they do when
	// they reach different replicas. For tests of the database claim.
	NoKeyLatch bool
	// DatabaseURL, when set, is used instead of a fresh database.
	DatabaseURL string
	// RequestTimeout is REQUEST_TIMEOUT (default none); only the HTTP
	// part (httpkit.New) reads it.
	RequestTimeout time.Duration
	// ReplicaReads makes the queries read the test server's standby
	// (StandbyOf), which the test then holds for its whole life: Env.Standby.
	ReplicaReads ReplicaReads
	// ReadReplicaURL, with ReplicaWhenCurrent, is the replica to read
	// instead of the standby (a test of a replica that is down).
	ReadReplicaURL string
}

// ReplicaReads says how an Env's queries use a read replica.
type ReplicaReads int

const (
	// NoReplica: every read goes to the primary (READ_DATABASE_URL unset).
	NoReplica ReplicaReads = iota
	// ReplicaWhenCurrent: the service's reader (store.ReplicaReader).
	ReplicaWhenCurrent
	// PlainReplicaReads is the naive variant: every query and every token
	// check reads the replica, whatever its lag.
	PlainReplicaReads
)

// New starts the service's core on a fresh database and creates one staff
// actor.
func New(t testing.TB, opts ...Options) *Env {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	// A race test queues many requests on one row or one key, and holds the
	// first until the others have arrived; on a loaded machine that takes
	// seconds. The waits are long enough that none ends for slowness (and
	// below the 15 s statement_timeout); a test of a wait sets its own.
	if o.KeyWait == 0 {
		o.KeyWait = 10 * time.Second
	}
	if o.KeyTTL == 0 {
		o.KeyTTL = 24 * time.Hour
	}
	if o.MaxConns == 0 {
		o.MaxConns = 16
	}
	if o.LockTimeout == 0 {
		o.LockTimeout = 10 * time.Second
	}
	url := o.DatabaseURL
	if url == "" {
		url = DB(t)
	}
	ctx := context.Background()
	lockTimeout := o.LockTimeout
	hooks := &Hooks{}
	pool, err := postgres.NewPool(ctx, postgres.PoolConfig{
		URL: url, MaxConns: o.MaxConns,
		StatementTimeout: 15 * time.Second, LockTimeout: lockTimeout, IdleInTxTimeout: 30 * time.Second,
		ConnectTimeout: 3 * time.Second, Tracer: hooks,
	})
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	log := Logger(t)
	reg := prometheus.NewRegistry()
	runner := store.NewRunner(pool, log, reg, store.RetryPolicy{MaxAttempts: 10}, store.KeyConfig{
		TTL: o.KeyTTL, Wait: o.KeyWait, LockTimeout: lockTimeout,
	})
	var transactor app.Transactor = runner
	var latch app.KeyLatch = runner
	if o.NoKeyLatch {
		latch = nil
	}
	if o.Wrap != nil {
		transactor = o.Wrap(transactor)
		if l, ok := transactor.(app.KeyLatch); ok && latch != nil {
			latch = l
		}
	}
	var reader app.Reader = runner
	var standby *Standby
	var plainReplica *store.Runner
	if o.ReplicaReads != NoReplica {
		replicaURL := o.ReadReplicaURL
		if replicaURL == "" {
			standby = StandbyOf(t)
			standby.acquire(t)
			replicaURL = standby.URL(databaseName(url))
		}
		replica, err := postgres.NewPool(ctx, postgres.PoolConfig{
			URL: replicaURL, MaxConns: o.MaxConns,
			StatementTimeout: 15 * time.Second, LockTimeout: lockTimeout, IdleInTxTimeout: 30 * time.Second,
			ConnectTimeout: 3 * time.Second,
		})
		if err != nil {
			t.Fatalf("open the replica pool: %v", err)
		}
		t.Cleanup(replica.Close)
		if o.ReplicaReads == PlainReplicaReads {
			plainReplica = store.NewRunner(replica, log, nil, store.RetryPolicy{}, store.KeyConfig{})
			reader = plainReplica
		} else {
			reader = store.NewReplicaReader(runner, replica, log, reg)
		}
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

// databaseName is the database a connection string names.
func databaseName(u string) string {
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		return ""
	}
	return cfg.Database
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
	series:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue series
				}
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
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

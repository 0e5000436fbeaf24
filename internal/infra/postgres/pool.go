// Package postgres is the connection layer: it opens the pool and holds, in
// the Pool value, what every transaction carries (the guard timeouts, the
// watch on synchronous-replication commits); it runs transactions (Runner,
// with retry), sends statements through the transaction pipe and batches,
// translates driver errors, traces round trips, encodes UUIDs and migrates
// the schema. It knows no table: the repositories (internal/infra/store)
// are built on it, never the reverse (ADR 0024).
package postgres

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/ordersvc/ordersvc/internal/app"
)

// PoolConfig holds the pool's size and the guard settings that every
// transaction carries, so that no statement, lock wait or forgotten
// transaction can hold resources for long (seed: "Set guards").
type PoolConfig struct {
	URL string
	// MaxConns bounds the pool. Zero means DefaultMaxConns.
	MaxConns int32
	// StatementTimeout aborts any statement running longer.
	StatementTimeout time.Duration
	// LockTimeout aborts any statement waiting longer for a lock.
	LockTimeout time.Duration
	// IdleInTxTimeout ends sessions that sit idle inside a transaction.
	IdleInTxTimeout time.Duration
	// ConnectTimeout bounds dialling, so that requests fail fast while the
	// database is down.
	ConnectTimeout time.Duration
	// Tracer, when set, sees every statement and batch (tests use it to
	// hold a connection at a named statement and force an interleaving).
	Tracer pgx.QueryTracer
	// TracerProvider, when set, records a span for each round trip made
	// under a recording span (see dbTracer). Nil: tracing is off and costs
	// nothing.
	TracerProvider trace.TracerProvider
	// ApplicationName, when set, is every connection's application_name,
	// replacing one in the URL: the service announces there the schema it
	// was built for (Schema.Announcement).
	ApplicationName string
}

// FAST PATH (docs/fast-path.md #10): prepared statements cached per
// connection (pgx's default exec mode, kept; see below).
//
// NewPool opens a pool on c.URL. It does not wait for the database; call
// Ping for that.
//
// The guards are not connection settings: a connection-level setting (a
// startup parameter, or SET) is refused by PgBouncer in transaction mode or,
// worse, stays on a server connection that the pooler then hands to another
// client. The Runner and the Purger send them per
// transaction instead (GuardsSet, with is_local), in front of the first
// statement, in the same round trip: they hold on a direct connection and
// behind a transaction pooler alike, and cost no round trip.
//
// pgx's default_query_exec_mode in the URL is honoured. Without it pgx
// caches named prepared statements per connection (cache_statement): every
// query is static sqlc text, so each connection prepares it once and then
// sends only Bind/Execute, and the server plans it once: GuardsSet forces
// the generic plan (docs/fast-path.md #14), which PostgreSQL's default
// (plan_cache_mode = auto) gave up for a new custom plan at every execution
// of StockLockRows, StockAddDeltas and the keyset pages. Measured against
// cache_describe: placements 17% and mixed traffic 38% faster
// (docs/bench/REPORT.md). Behind PgBouncer in transaction mode before 1.21
// (or with max_prepared_statements = 0) a named statement prepared on one
// server connection is missing, or already exists, on the next: use
// default_query_exec_mode=cache_describe there (README, docs/scaling.md).
func NewPool(ctx context.Context, c PoolConfig) (*Pool, error) {
	cfg, err := pgxpool.ParseConfig(c.URL)
	if err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	cfg.MaxConns = DefaultMaxConns()
	if c.MaxConns > 0 {
		cfg.MaxConns = c.MaxConns
	}
	cfg.HealthCheckPeriod = 5 * time.Second
	if c.ConnectTimeout > 0 {
		cfg.ConnConfig.ConnectTimeout = c.ConnectTimeout
	}
	if c.ApplicationName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = c.ApplicationName
	} else if _, set := cfg.ConnConfig.RuntimeParams["application_name"]; !set {
		// application_name is one of the few startup parameters PgBouncer
		// passes on (it tracks it per client).
		cfg.ConnConfig.RuntimeParams["application_name"] = "ordersvc"
	}
	cfg.ConnConfig.Tracer = composeTracers(cfg.ConnConfig.Tracer, c.Tracer, c.TracerProvider, cfg)
	// FAST PATH (docs/fast-path.md #5): UUIDs as 16 binary bytes.
	cfg.AfterConnect = func(_ context.Context, conn *pgx.Conn) error {
		registerUUID(conn.TypeMap())
		return nil
	}
	watch := newSyncRepWatch()
	cfg.ConnConfig.OnNotice = watch.noticeHandler(cfg.ConnConfig.OnNotice)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Pool{Pool: pool, guards: newGuards(c), syncRep: watch}, nil
}

// Pool is a pgx pool with what every transaction on it carries: the guard
// timeouts (sent with each BEGIN) and the watch on commits whose wait for a
// synchronous standby was cancelled. It is a value the caller owns and
// passes on (to Runner, the repositories' runner, the sweeps); nothing of it
// lives in a package variable. The embedded *pgxpool.Pool answers
// everything else (Exec, Ping, Close, Stat, …).
type Pool struct {
	*pgxpool.Pool
	// guards is nil on a pool that Wrap made: nothing is sent, the
	// server's settings apply.
	guards  *guards
	syncRep *syncRepWatch
}

// Wrap makes a Pool of a pool that NewPool did not open: it carries no
// guards and does not watch synchronous-replication commits.
func Wrap(pool *pgxpool.Pool) *Pool { return &Pool{Pool: pool} }

// Conn returns the connection that runs each statement on its own, on the
// pool, with the pool's guards in front (outside any explicit transaction),
// and auth, the request's token check (nil for none), in front of the next
// statement while it is pending.
func (p *Pool) Conn(auth *app.AuthCheck) Conn { return newPoolPipe(p, auth) }

// composeTracers is the pool's tracer: the one the parsed configuration
// already has (none from a URL, but a caller's own config may carry one), the
// caller's, and the OpenTelemetry tracer when tracing is on, each seeing
// every round trip. It is nil when there is none, so pgx skips tracing
// altogether.
func composeTracers(parsed, given pgx.QueryTracer, tp trace.TracerProvider, cfg *pgxpool.Config) pgx.QueryTracer {
	var ts []pgx.QueryTracer
	for _, t := range []pgx.QueryTracer{parsed, given} {
		if t != nil {
			ts = append(ts, t)
		}
	}
	if tp != nil {
		ts = append(ts, newDBTracer(tp, cfg))
	}
	switch len(ts) {
	case 0:
		return nil
	case 1:
		return ts[0]
	}
	return multitracer.New(ts...)
}

// DefaultMaxConns is two connections per core the process may use, at
// least four. A transaction holds its connection across its few pipelined
// round trips and the Go work between them, so one per core leaves the
// database idle part of the time; many more only add waiters on hot rows
// and context switches. Measured on 2 cores (docs/bench/REPORT.md): 2, 4, 8
// and 16 connections give the same spread throughput within noise, hot-row
// orders lose 12% from 2 to 4 and 25% to 16 (p99 85 → 243 ms), reads gain
// 13% from 2 to 4 and 20% to 16. Override with DB_MAX_CONNS.
func DefaultMaxConns() int32 { return int32(max(4, 2*runtime.GOMAXPROCS(0))) }

// Millis is d in whole milliseconds, as PostgreSQL's timeout settings take it.
func Millis(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

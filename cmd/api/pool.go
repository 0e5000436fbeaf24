package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
	"github.com/ordersvc/ordersvc/internal/infra/store"
)

// openPool opens the pool with the configured guards and checks that the
// database answers, so that a bad DATABASE_URL fails at start with one line.
// Its connections announce role and the schema this binary was built for in
// application_name (postgres.Schema.Announcement). tp traces its round trips
// (serve, with tracing on); nil for none.
func openPool(ctx context.Context, c config, role string, tp trace.TracerProvider) (*postgres.Pool, error) {
	pc, err := poolConfig(c, c.DatabaseURL, role, tp)
	if err != nil {
		return nil, err
	}
	pool, err := postgres.NewPool(ctx, pc)
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

// poolConfig is the configuration of a pool to url with the configured
// guards; its connections announce role and the schema this binary was
// built for in application_name.
func poolConfig(c config, url, role string, tp trace.TracerProvider) (postgres.PoolConfig, error) {
	schema, err := postgres.EmbeddedSchema()
	if err != nil {
		return postgres.PoolConfig{}, err
	}
	return postgres.PoolConfig{
		ApplicationName:  schema.Announcement(role),
		URL:              url,
		MaxConns:         c.DBMaxConns,
		StatementTimeout: c.DBStatementTimeout,
		LockTimeout:      c.DBLockTimeout,
		IdleInTxTimeout:  c.DBIdleInTxTimeout,
		ConnectTimeout:   3 * time.Second,
		TracerProvider:   tp,
	}, nil
}

// connect is the start of the one-shot commands: the configuration, and a
// pool for role that the caller closes.
func connect(ctx context.Context, getenv func(string) string, role string) (config, *postgres.Pool, error) {
	c, err := loadConfig(getenv, true)
	if err != nil {
		return c, nil, err
	}
	pool, err := openPool(ctx, c, role, nil)
	return c, pool, err
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

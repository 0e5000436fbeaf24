package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
	"github.com/ordersvc/ordersvc/internal/infra/store"
)

// openReader is the queries' reader: a replica-aware reader on a pool of
// its own, with the same guards, or with none when READ_DATABASE_URL is
// unset (every read goes to the primary). An unparsable READ_DATABASE_URL stops the
// start; a replica that does not answer, or is not a replica, only logs a
// warning: its reads go to the primary until it proves current (ADR 0023).
func openReader(ctx context.Context, c config, runner *store.Runner, log *slog.Logger, reg prometheus.Registerer, tp trace.TracerProvider) (app.Reader, func(), error) {
	if c.ReadDatabaseURL == "" {
		return store.NewReplicaReader(runner, nil, log, reg), func() {}, nil
	}
	if _, err := pgxpool.ParseConfig(c.ReadDatabaseURL); err != nil {
		return nil, nil, fmt.Errorf("READ_DATABASE_URL: %w", err)
	}
	pc, err := poolConfig(c, c.ReadDatabaseURL, "serve", tp)
	if err != nil {
		return nil, nil, err
	}
	pool, err := postgres.NewPool(ctx, pc)
	if err != nil {
		return nil, nil, fmt.Errorf("READ_DATABASE_URL: %w", err)
	}
	reader := store.NewReplicaReader(runner, pool, log, reg)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := reader.CheckReplica(pctx); err != nil {
		log.Warn("READ_DATABASE_URL: reads go to the primary until the replica proves current", "err", err)
	} else {
		log.Info("read replica configured: queries read it when it has replayed the primary's position")
	}
	return reader, pool.Close, nil
}

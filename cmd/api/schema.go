package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/ordersvc/ordersvc/internal/httpapi"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
)

// schemaGate keeps `api serve` from serving a schema older than it needs
// (ADR 0016): until every expand migration it was built with is applied,
// /readyz answers 503 and every /v1 request 503 with Retry-After, never a 500
// on a missing table or column. It looks again every interval while the
// schema is behind, so the replica becomes ready without a restart once
// `api migrate up` is done. A newer schema (a later expand migration) is
// fine: the binary needs its own migrations, not the database's newest.
type schemaGate struct {
	schema   postgres.Schema
	db       *sql.DB
	log      *slog.Logger
	interval time.Duration
	// behind holds the error to answer with; nil once the schema is there.
	behind atomic.Pointer[error]
}

func newSchemaGate(pool *pgxpool.Pool, log *slog.Logger, interval time.Duration) (*schemaGate, error) {
	schema, err := postgres.EmbeddedSchema()
	if err != nil {
		return nil, err
	}
	g := &schemaGate{schema: schema, db: stdlib.OpenDBFromPool(pool), log: log, interval: interval}
	unknown := fmt.Errorf("%w: not checked yet", httpapi.ErrSchemaBehind)
	g.behind.Store(&unknown)
	return g, nil
}

// err is nil when this binary may serve the database's schema.
func (g *schemaGate) err() error {
	if p := g.behind.Load(); p != nil {
		return *p
	}
	return nil
}

// check reads the applied migrations once and reports whether the schema is
// there. A failed read keeps the previous answer.
func (g *schemaGate) check(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	missing, err := g.schema.Missing(ctx, g.db)
	if err != nil {
		g.log.Warn("schema check failed", "err", err)
		return false
	}
	if len(missing) > 0 {
		behind := fmt.Errorf("%w: migrations %v are not applied (run api migrate up)", httpapi.ErrSchemaBehind, missing)
		if prev := g.err(); prev == nil || prev.Error() != behind.Error() {
			g.log.Warn("the database schema is older than this release needs: /readyz and /v1 answer 503 until it is migrated",
				"missing", missing, "required", g.schema.Required, "built_for", g.schema.Built)
		}
		g.behind.Store(&behind)
		return false
	}
	g.behind.Store(nil)
	g.log.Info("schema current", "required", g.schema.Required, "built_for", g.schema.Built)
	return true
}

// run checks every interval until the schema is there or ctx ends.
func (g *schemaGate) run(ctx context.Context) {
	t := time.NewTicker(g.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if g.check(ctx) {
				return
			}
		}
	}
}

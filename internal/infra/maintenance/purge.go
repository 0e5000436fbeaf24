package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
)

// PurgeConfig sets the idempotency retention purge.
type PurgeConfig struct {
	// Interval is how often a round runs (CLEANUP_INTERVAL) [1m].
	Interval time.Duration
	// BatchSize is how many records one transaction deletes at most [1000].
	BatchSize int
}

// Purger removes expired idempotency records (EXT.IDEMPOTENCY.RETENTION.001)
// in bounded batches.
//
//   - Never before expiry: a record goes only when expires_at <= now(),
//     checked when the row is locked and again on the version deleted, so a
//     record that a request has just reclaimed (its expiry moved forward) is
//     kept.
//   - Never waits on a request: rows are chosen FOR UPDATE SKIP LOCKED, so a
//     record an in-flight request holds is skipped, and a request waits on the
//     purge for one short batch at most, well within its lock timeout.
//   - One replica at a time: each batch transaction first takes
//     pg_try_advisory_xact_lock (pattern 6); a replica that does not get it
//     ends its round, since another one is purging.
//
// Patterns and rule ids: docs/patterns.md.
type Purger struct{ sweep }

// NewPurger returns a purger. Its metrics are registered on reg, when reg is
// not nil.
func NewPurger(pool *postgres.Pool, log *slog.Logger, reg prometheus.Registerer, cfg PurgeConfig) *Purger {
	return &Purger{newSweep(pool, log, reg, "idempotency purge", cfg.Interval, cfg.BatchSize, prometheus.CounterOpts{
		Name: "ordersvc_idempotency_purged_total",
		Help: "Expired idempotency records deleted by the retention purge.",
	})}
}

// Run purges every Interval until ctx ends.
func (p *Purger) Run(ctx context.Context) { p.run(ctx, p.PurgeOnce) }

// PurgeOnce runs one round: batches until one comes up short, another
// replica holds the purge lock, or ctx ends. It returns how many records it
// deleted.
func (p *Purger) PurgeOnce(ctx context.Context) (int64, error) {
	return p.round(ctx, func(ctx context.Context, tx postgres.Conn, from time.Time) (int64, time.Time, bool, error) {
		if locked, err := p.q.IdempotencyPurgeLock(ctx, tx); err != nil || !locked {
			return 0, from, false, err
		}
		res, err := p.q.IdempotencyPurgeExpired(ctx, tx, dbsqlc.IdempotencyPurgeExpiredParams{FromExpiry: from, BatchSize: int32(p.size)})
		return res.Deleted, res.LastExpiry, true, err
	})
}

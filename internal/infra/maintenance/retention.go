package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
)

// RetentionConfig sets the deletion of delivered outbox events.
type RetentionConfig struct {
	// Retention is how long a delivered event is kept (OUTBOX_RETENTION) [168h].
	Retention time.Duration
	// Interval is how often a round runs (CLEANUP_INTERVAL) [1m].
	Interval time.Duration
	// BatchSize is how many events one transaction deletes at most [1000].
	BatchSize int
}

// OutboxRetention deletes delivered outbox events older than the retention,
// in bounded batches, with the same rules as the idempotency purge
// (Purger):
//
//   - Only delivered events: pending, claimed and dead events stay whatever
//     their age; a dead event waits for `api outbox requeue`.
//   - Short transactions: each batch deletes at most BatchSize rows and
//     commits, so no transaction holds many row locks, runs into
//     DB_STATEMENT_TIMEOUT, or holds back vacuum for the length of a large
//     deletion; and the rows it picks are chosen FOR UPDATE SKIP LOCKED, so
//     it never waits on anyone.
//   - One replica at a time: each batch first takes
//     pg_try_advisory_xact_lock (pattern 6), never a table lock, which
//     would queue every placement's event insert behind it; a replica that
//     does not get it ends its round.
//
// Patterns and rule ids: docs/patterns.md.
type OutboxRetention struct {
	sweep
	retention time.Duration
}

// NewOutboxRetention returns the retention worker. Its metric is registered
// on reg, when reg is not nil.
func NewOutboxRetention(pool *postgres.Pool, log *slog.Logger, reg prometheus.Registerer, cfg RetentionConfig) *OutboxRetention {
	if cfg.Retention <= 0 {
		cfg.Retention = 168 * time.Hour
	}
	return &OutboxRetention{
		sweep: newSweep(pool, log, reg, "outbox retention", cfg.Interval, cfg.BatchSize, prometheus.CounterOpts{
			Name: "ordersvc_outbox_deleted_total",
			Help: "Delivered outbox events deleted after OUTBOX_RETENTION.",
		}),
		retention: cfg.Retention,
	}
}

// Run deletes every Interval until ctx ends.
func (r *OutboxRetention) Run(ctx context.Context) {
	r.run(ctx, r.DeleteOnce, "retention", r.retention)
}

// DeleteOnce runs one round: batches until one comes up short, another
// replica holds the lock, or ctx ends. The cutoff is fixed at the start of
// the round. It returns how many events it deleted.
func (r *OutboxRetention) DeleteOnce(ctx context.Context) (int64, error) {
	before := time.Now().Add(-r.retention)
	return r.round(ctx, func(ctx context.Context, tx postgres.Conn, from time.Time) (int64, time.Time, bool, error) {
		if locked, err := r.q.OutboxRetentionLock(ctx, tx); err != nil || !locked {
			return 0, from, false, err
		}
		res, err := r.q.OutboxDeleteDelivered(ctx, tx, dbsqlc.OutboxDeleteDeliveredParams{
			Before: before, FromDelivered: from, BatchSize: int32(r.size),
		})
		return res.Deleted, res.LastDelivered, true, err
	})
}

package infra

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
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
type OutboxRetention struct {
	pool    *pgxpool.Pool
	q       *dbsqlc.Queries
	log     *slog.Logger
	cfg     RetentionConfig
	deleted prometheus.Counter
}

// NewOutboxRetention returns the retention worker. Its metric is registered
// on reg, when reg is not nil.
func NewOutboxRetention(pool *pgxpool.Pool, log *slog.Logger, reg prometheus.Registerer, cfg RetentionConfig) *OutboxRetention {
	if cfg.Retention <= 0 {
		cfg.Retention = 168 * time.Hour
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 1000
	}
	r := &OutboxRetention{pool: pool, q: dbsqlc.New(), log: log, cfg: cfg,
		deleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ordersvc_outbox_deleted_total",
			Help: "Delivered outbox events deleted after OUTBOX_RETENTION.",
		}),
	}
	if reg != nil {
		reg.MustRegister(r.deleted)
	}
	return r
}

// Run deletes every Interval until ctx ends. A round in progress stops
// between batches; each batch commits on its own.
func (r *OutboxRetention) Run(ctx context.Context) {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		n, err := r.DeleteOnce(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			r.log.Warn("outbox retention", "err", err, "deleted", n)
		case n > 0:
			r.log.Info("outbox retention", "deleted", n, "retention", r.cfg.Retention)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// DeleteOnce runs one round: batches until one comes up short, another
// replica holds the lock, or ctx ends. The cutoff is fixed at the start of
// the round. It returns how many events it deleted.
func (r *OutboxRetention) DeleteOnce(ctx context.Context) (int64, error) {
	before := time.Now().Add(-r.cfg.Retention)
	var total int64
	var from time.Time // keyset cursor: the latest delivered_at deleted so far
	for ctx.Err() == nil {
		n, last, locked, err := r.batch(ctx, before, from)
		total += n
		if err != nil || !locked || n < int64(r.cfg.BatchSize) {
			return total, err
		}
		from = last
	}
	return total, nil
}

// batch deletes one batch in its own transaction under the retention lock,
// with the pool's guards in force like every other transaction (they ride
// with BEGIN, so they hold behind PgBouncer too).
func (r *OutboxRetention) batch(ctx context.Context, before, from time.Time) (n int64, last time.Time, locked bool, err error) {
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return 0, from, false, fmt.Errorf("outbox retention batch: begin: %w", translate(err))
	}
	defer conn.Release()
	tx := newTxPipe(conn, poolGuards(r.pool), pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	committed := false
	defer func() {
		if !committed {
			tx.rollback(context.WithoutCancel(ctx))
		}
	}()
	if locked, err = r.q.OutboxRetentionLock(ctx, tx); err != nil || !locked {
		return 0, from, false, translate(err)
	}
	res, err := r.q.OutboxDeleteDelivered(ctx, tx, dbsqlc.OutboxDeleteDeliveredParams{
		Before: before, FromDelivered: from, BatchSize: int32(r.cfg.BatchSize),
	})
	if err != nil {
		return 0, from, true, fmt.Errorf("outbox retention batch: %w", translate(err))
	}
	if err = tx.commit(ctx); err != nil {
		return 0, from, true, fmt.Errorf("outbox retention batch: commit: %w", translate(err))
	}
	committed = true
	r.deleted.Add(float64(res.Deleted))
	return res.Deleted, res.LastDelivered, true, nil
}

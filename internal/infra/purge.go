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
type Purger struct {
	pool   *pgxpool.Pool
	q      *dbsqlc.Queries
	log    *slog.Logger
	cfg    PurgeConfig
	purged prometheus.Counter
}

// NewPurger returns a purger. Its metrics are registered on reg, when reg is
// not nil.
func NewPurger(pool *pgxpool.Pool, log *slog.Logger, reg prometheus.Registerer, cfg PurgeConfig) *Purger {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 1000
	}
	p := &Purger{pool: pool, q: dbsqlc.New(), log: log, cfg: cfg,
		purged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ordersvc_idempotency_purged_total",
			Help: "Expired idempotency records deleted by the retention purge.",
		}),
	}
	if reg != nil {
		reg.MustRegister(p.purged)
	}
	return p
}

// Run purges every Interval until ctx ends. A round in progress stops
// between batches; each batch commits on its own, so nothing is half done.
func (p *Purger) Run(ctx context.Context) {
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		n, err := p.PurgeOnce(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			p.log.Warn("idempotency purge", "err", err, "purged", n)
		case n > 0:
			p.log.Info("idempotency purge", "purged", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// PurgeOnce runs one round: batches until one comes up short, another
// replica holds the purge lock, or ctx ends. It returns how many records it
// deleted.
func (p *Purger) PurgeOnce(ctx context.Context) (int64, error) {
	var total int64
	var from time.Time // keyset cursor: the latest expiry deleted so far
	for ctx.Err() == nil {
		n, last, locked, err := p.batch(ctx, from)
		total += n
		if err != nil || !locked || n < int64(p.cfg.BatchSize) {
			return total, err
		}
		from = last
	}
	return total, nil
}

// batch deletes one batch in its own transaction under the purge lock.
func (p *Purger) batch(ctx context.Context, from time.Time) (n int64, last time.Time, locked bool, err error) {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return 0, from, false, fmt.Errorf("purge batch: begin: %w", translate(err))
	}
	defer conn.Release()
	tx := newTxPipe(conn, poolGuards(p.pool), pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	committed := false
	defer func() {
		if !committed {
			tx.rollback(context.WithoutCancel(ctx))
		}
	}()
	if locked, err = p.q.IdempotencyPurgeLock(ctx, tx); err != nil || !locked {
		return 0, from, false, translate(err)
	}
	res, err := p.q.IdempotencyPurgeExpired(ctx, tx, dbsqlc.IdempotencyPurgeExpiredParams{FromExpiry: from, BatchSize: int32(p.cfg.BatchSize)})
	if err != nil {
		return 0, from, true, fmt.Errorf("purge batch: %w", translate(err))
	}
	if err = tx.commit(ctx); err != nil {
		return 0, from, true, fmt.Errorf("purge batch: commit: %w", translate(err))
	}
	committed = true
	p.purged.Add(float64(res.Deleted))
	return res.Deleted, res.LastExpiry, true, nil
}

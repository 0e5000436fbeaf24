package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
)

// sweep is what the idempotency purge (Purger) and the outbox retention
// (OutboxRetention) share: rounds every interval, each round a series of
// short transactions that delete at most size rows each, walking a keyset
// cursor, under a transaction-level advisory lock so that one replica at a
// time sweeps (pattern 6). The two differ only in their batch statements.
//
// Patterns and rule ids: docs/patterns.md.
type sweep struct {
	tx       *postgres.Runner
	q        *dbsqlc.Queries
	log      *slog.Logger
	name     string // in log lines and errors: "idempotency purge"
	interval time.Duration
	size     int
	deleted  prometheus.Counter
	// lastRound is when a round last ran to its end without an error
	// (ordersvc_<name>_last_success_timestamp_seconds): an alert sees a
	// sweep that stopped making progress even when it deletes nothing.
	lastRound prometheus.Gauge
	// deadline bounds each batch (postgres.Pool.BackgroundDeadline); zero, only in the
	// test that shows what it prevents, leaves a batch unbounded.
	deadline time.Duration
}

// sweepBatch runs one batch's statements in tx: it takes the sweep's
// advisory lock (locked is false when another replica holds it), then
// deletes at most size rows past the cursor from, and returns how many and
// the cursor's new position.
type sweepBatch func(ctx context.Context, tx postgres.Conn, from time.Time) (n int64, last time.Time, locked bool, err error)

// newSweep applies the defaults (a round a minute, 1,000 rows a batch) and
// registers the counter and the time of the last good round on reg, when
// reg is not nil.
func newSweep(pool *postgres.Pool, log *slog.Logger, reg prometheus.Registerer, name string, interval time.Duration, size int, counter prometheus.CounterOpts) sweep {
	if interval <= 0 {
		interval = time.Minute
	}
	if size <= 0 {
		size = 1000
	}
	// The runner's retry counter is the use cases' (store.Runner): it is
	// not registered here, and a batch is never retried (MaxAttempts 1).
	tx := postgres.NewRunner(pool, log, nil, postgres.RetryPolicy{MaxAttempts: 1})
	s := sweep{tx: tx, q: dbsqlc.New(), log: log, name: name, interval: interval, size: size, deleted: prometheus.NewCounter(counter),
		lastRound: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ordersvc_" + strings.ReplaceAll(name, " ", "_") + "_last_success_timestamp_seconds",
			Help: "When a round of the " + name + " last ran to its end without an error (Unix seconds; 0: not yet). A replica that found another one sweeping counts.",
		}),
		deadline: pool.BackgroundDeadline()}
	if reg != nil {
		reg.MustRegister(s.deleted, s.lastRound)
	}
	return s
}

// run calls round every interval (Loop) until ctx ends. A round in
// progress stops between batches; each batch commits on its own, so nothing
// is half done.
func (s sweep) run(ctx context.Context, round func(context.Context) (int64, error), attrs ...any) {
	Loop(ctx, func(ctx context.Context) time.Duration {
		start := time.Now()
		n, err := round(ctx)
		switch {
		case ctx.Err() != nil:
			return 0
		case err != nil:
			s.log.Warn(s.name, append([]any{"err", err, "deleted", n}, attrs...)...)
		default:
			s.lastRound.SetToCurrentTime()
			if n > 0 {
				s.log.Info(s.name, append([]any{"deleted", n}, attrs...)...)
			}
		}
		return max(0, s.interval-time.Since(start)) // rounds start every interval
	})
}

// round runs batches until one comes up short, another replica holds the
// lock, or ctx ends. It returns how many rows it deleted.
func (s sweep) round(ctx context.Context, batch sweepBatch) (int64, error) {
	var total int64
	var from time.Time // keyset cursor: the latest key deleted so far
	for ctx.Err() == nil {
		n, last, locked, err := s.batch(ctx, from, batch)
		total += n
		if err != nil || !locked || n < int64(s.size) {
			return total, err
		}
		from = last
	}
	return total, nil
}

// batch runs one batch in its own transaction (postgres.Runner.Once), with
// the pool's guards in force like every other transaction (they ride with
// BEGIN, so they hold behind PgBouncer too), within the sweep's deadline: a
// batch queued in PgBouncer while PostgreSQL is down gives up after it, not
// after PgBouncer's 120 s.
func (s sweep) batch(ctx context.Context, from time.Time, run sweepBatch) (n int64, last time.Time, locked bool, err error) {
	if s.deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.deadline)
		defer cancel()
	}
	err = s.tx.Once(ctx, nil, app.ReadCommitted, func(ctx context.Context, tx postgres.Conn) error {
		var err error
		if n, last, locked, err = run(ctx, tx, from); err == nil && !locked {
			return errNotLocked // roll back: another replica sweeps
		}
		return err
	})
	switch {
	case errors.Is(err, errNotLocked):
		return 0, from, false, nil
	case err != nil:
		return 0, from, locked, fmt.Errorf("%s batch: %w", s.name, postgres.Translate(err))
	}
	s.deleted.Add(float64(n))
	return n, last, true, nil
}

// errNotLocked ends a batch whose advisory lock another replica holds.
var errNotLocked = errors.New("the sweep's lock is held by another replica")

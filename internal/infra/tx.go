package infra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// RetryPolicy bounds the whole-transaction retries on 40001/40P01.
type RetryPolicy struct {
	MaxAttempts int           // including the first; default 5
	BaseDelay   time.Duration // default 5ms; doubles per attempt
	MaxDelay    time.Duration // default 200ms
}

// Runner implements app.Transactor on a pgx pool.
type Runner struct {
	pool    *pgxpool.Pool
	log     *slog.Logger
	retry   RetryPolicy
	keys    KeyConfig
	q       *dbsqlc.Queries
	retries *prometheus.CounterVec
	latch   *keyLatch
	guards  *guards
	// keepReadOnlyConns is the naive variant that keeps a connection
	// after a write it carried was refused as read-only (tests only).
	keepReadOnlyConns bool
}

// NewRunner returns a transaction runner. Its metrics are registered on reg.
func NewRunner(pool *pgxpool.Pool, log *slog.Logger, reg prometheus.Registerer, retry RetryPolicy, keys KeyConfig) *Runner {
	if retry.MaxAttempts <= 0 {
		retry.MaxAttempts = 5
	}
	if retry.BaseDelay <= 0 {
		retry.BaseDelay = 5 * time.Millisecond
	}
	if retry.MaxDelay <= 0 {
		retry.MaxDelay = 200 * time.Millisecond
	}
	r := &Runner{
		pool: pool, log: log, retry: retry, keys: keys, q: dbsqlc.New(), guards: poolGuards(pool),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ordersvc_tx_retries_total",
			Help: "Transactions run again after a serialization failure (40001) or deadlock (40P01).",
		}, []string{"sqlstate"}),
	}
	r.retries.WithLabelValues(sqlSerializationFailure) // present from the start, at zero
	r.retries.WithLabelValues(sqlDeadlockDetected)
	if reg != nil {
		reg.MustRegister(r.retries)
	}
	r.latch = newKeyLatch(reg)
	return r
}

// LatchKey implements app.KeyLatch: the requests of this process that carry
// the same key wait for each other here, without a connection, for at most
// IDEMPOTENCY_WAIT (see keyLatch).
func (r *Runner) LatchKey(ctx context.Context, k app.Key) (context.Context, func(), error) {
	return r.latch.acquire(ctx, k, r.keys.Wait)
}

// InTx runs fn in one transaction and commits it. On a serialization failure
// or deadlock, at any statement or at commit, it rolls back and runs the WHOLE
// function again, reads included, after a jittered exponential backoff, at
// most MaxAttempts times. Each retry is logged and counted, and re-reads the
// request's authorization (app.AuthCheck.Recheck). The rollback
// survives a cancelled request context, so a connection is never returned to
// the pool in the middle of a transaction.
func (r *Runner) InTx(ctx context.Context, iso app.Isolation, fn func(ctx context.Context, tx app.Repositories) error) error {
	opts := pgx.TxOptions{IsoLevel: pgx.ReadCommitted}
	if iso == app.Serializable {
		opts.IsoLevel = pgx.Serializable
	}
	for attempt := 1; ; attempt++ {
		err := r.once(ctx, opts, fn)
		if err == nil || !retryable(err) {
			return translate(err)
		}
		if attempt >= r.retry.MaxAttempts {
			r.log.WarnContext(ctx, "transaction retries exhausted", "attempts", attempt, "err", err)
			return errors.Join(app.ErrUnavailable, fmt.Errorf("after %d attempts: %w", attempt, err))
		}
		var pgErr *pgconn.PgError
		errors.As(err, &pgErr)
		r.retries.WithLabelValues(pgErr.Code).Inc()
		delay := r.backoff(attempt)
		r.log.InfoContext(ctx, "retrying transaction", "attempt", attempt, "sqlstate", pgErr.Code, "delay", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		// The next attempt reads again whether the caller may act: the
		// token check rides in front of its first statement (ADR 0011).
		app.AuthCheckOf(ctx).Recheck()
	}
}

// backoff is "full jitter": a uniform delay up to an exponentially growing cap.
func (r *Runner) backoff(attempt int) time.Duration {
	limit := r.retry.BaseDelay << (attempt - 1)
	if limit > r.retry.MaxDelay || limit <= 0 {
		limit = r.retry.MaxDelay
	}
	return time.Duration(rand.Int64N(int64(limit)) + 1)
}

func (r *Runner) once(ctx context.Context, opts pgx.TxOptions, fn func(ctx context.Context, tx app.Repositories) error) (err error) {
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if isReadOnly(err) && !r.keepReadOnlyConns {
			// The connection leads to a node that refuses writes (a standby,
			// a demoted or fenced primary). Closing it makes the pool dial
			// again, and the next dial finds the primary, through HAProxy's
			// health checks or target_session_attrs=read-write; kept, it
			// would fail every write it is given until it is recycled.
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
		conn.Release()
	}()
	tx := newTxPipe(conn, r.guards, opts)
	defer func() {
		if err != nil {
			// The request may be gone; the rollback must still happen.
			tx.rollback(context.WithoutCancel(ctx))
		}
	}()
	if err = fn(ctx, r.bind(tx)); err != nil {
		return err
	}
	if err = tx.commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// WithoutTx returns repositories that run each statement on the pool, in no
// explicit transaction.
func (r *Runner) WithoutTx() app.Repositories { return r.bind(newPoolPipe(r.pool)) }

func (r *Runner) bind(db dbtx) *repositories {
	return &repositories{db: db, q: r.q, keys: r.keys}
}

// Ping checks that the database answers.
func (r *Runner) Ping(ctx context.Context) error {
	return translate(r.pool.Ping(ctx))
}

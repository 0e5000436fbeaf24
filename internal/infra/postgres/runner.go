package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/app"
)

// RetryPolicy bounds the whole-transaction retries on 40001/40P01.
type RetryPolicy struct {
	MaxAttempts int           // including the first; default 5
	BaseDelay   time.Duration // default 5ms; doubles per attempt
	MaxDelay    time.Duration // default 200ms
}

// Runner runs transactions on a Pool: the one place that begins, commits
// and rolls back. The use cases' transactions (store.Runner) and the
// sweeps' batches (internal/infra/maintenance) both go through it.
type Runner struct {
	pool    *Pool
	log     *slog.Logger
	retry   RetryPolicy
	retries *prometheus.CounterVec
	// keepReadOnlyConns is the naive variant that keeps a connection
	// after a write it carried was refused as read-only (tests only).
	keepReadOnlyConns bool
}

// NewRunner returns a transaction runner on pool. Its retry counter is
// registered on reg, when reg is not nil.
func NewRunner(pool *Pool, log *slog.Logger, reg prometheus.Registerer, retry RetryPolicy) *Runner {
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
		pool: pool, log: log, retry: retry,
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
	return r
}

// Pool is the pool the runner's transactions run on.
func (r *Runner) Pool() *Pool { return r.pool }

// InTx runs fn in one transaction and commits it. On a serialization failure
// or deadlock, at any statement or at commit, it rolls back and runs the WHOLE
// function again, reads included, after a jittered exponential backoff, at
// most MaxAttempts times. Each retry is logged and counted, and re-reads the
// request's authorization (auth.Recheck; auth is the request's token check,
// which the transaction's connection carries, nil for none). The rollback
// survives a cancelled request context, so a connection is never returned to
// the pool in the middle of a transaction. Its error is translated
// (Translate).
func (r *Runner) InTx(ctx context.Context, auth *app.AuthCheck, iso app.Isolation, fn func(ctx context.Context, tx Conn) error) error {
	for attempt := 1; ; attempt++ {
		err := r.Once(ctx, auth, iso, fn)
		if err == nil || !retryable(err) {
			return Translate(err)
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
		auth.Recheck()
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

// FAST PATH (docs/fast-path.md #1): the transaction is a pipe, not a
// pgx.Tx (BEGIN goes with the first statement).
//
// Once runs fn in one transaction, once, with the pool's guards in force
// (they ride with BEGIN), and commits it when fn returns nil; otherwise it
// rolls back, even when ctx has ended. Its error is the driver's,
// untranslated, so that InTx can tell a retryable one. The transaction's
// connection carries auth, the request's token check (nil for none).
func (r *Runner) Once(ctx context.Context, auth *app.AuthCheck, iso app.Isolation, fn func(ctx context.Context, tx Conn) error) (err error) {
	opts := pgx.TxOptions{IsoLevel: pgx.ReadCommitted}
	if iso == app.Serializable {
		opts.IsoLevel = pgx.Serializable
	}
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
	tx := newTxPipe(conn, r.pool, opts, auth)
	defer func() {
		if err != nil {
			// The request may be gone; the rollback must still happen.
			tx.rollback(context.WithoutCancel(ctx))
		}
	}()
	if err = fn(ctx, tx); err != nil {
		return err
	}
	if err = tx.commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Ping checks that the database answers.
func (r *Runner) Ping(ctx context.Context) error {
	return Translate(r.pool.Ping(ctx))
}

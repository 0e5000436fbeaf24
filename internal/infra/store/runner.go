package store

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
)

// RetryPolicy bounds the whole-transaction retries on 40001/40P01.
type RetryPolicy = postgres.RetryPolicy

// Runner implements app.Transactor and app.Reader on a pool: it runs each
// use case's transaction through postgres.Runner (begin, retry, commit)
// and binds the repositories to it.
type Runner struct {
	tx    *postgres.Runner
	keys  KeyConfig
	q     *dbsqlc.Queries
	latch *keyLatch
	// recent holds the keys claimed lately, whose records are read ahead
	// of the transaction (docs/fast-path.md #12).
	recent *recentKeys
}

// NewRunner returns a use-case runner on pool. Its metrics are registered
// on reg.
func NewRunner(pool *postgres.Pool, log *slog.Logger, reg prometheus.Registerer, retry RetryPolicy, keys KeyConfig) *Runner {
	return &Runner{
		tx: postgres.NewRunner(pool, log, reg, retry), keys: keys, q: dbsqlc.New(),
		latch: newKeyLatch(reg), recent: newRecentKeys(),
	}
}

// Tx is the transaction runner underneath (tests reach its naive variants
// through it).
func (r *Runner) Tx() *postgres.Runner { return r.tx }

// FAST PATH (docs/fast-path.md #9): the key latch.
//
// LatchKey implements app.KeyLatch: the requests of this process that carry
// the same key wait for each other here, without a connection, for at most
// IDEMPOTENCY_WAIT (see keyLatch).
func (r *Runner) LatchKey(ctx context.Context, auth *app.AuthCheck, k app.Key) (context.Context, func(), error) {
	return r.latch.acquire(ctx, auth, k, r.keys.Wait)
}

// InTx implements app.Transactor: fn runs in one transaction, run again
// whole on a serialization failure or deadlock (postgres.Runner.InTx), on
// a transaction that carries auth, the request's token check. A write that
// went out with COMMIT fails there, after postgres.Runner.InTx translated
// the error, so only its broken constraint is read here, as wrap reads a
// statement's (outcomeOfConstraint).
func (r *Runner) InTx(ctx context.Context, auth *app.AuthCheck, iso app.Isolation, fn func(ctx context.Context, tx app.Repositories) error) error {
	return outcomeOfConstraint(r.tx.InTx(ctx, auth, iso, func(ctx context.Context, tx postgres.Conn) error {
		repos := r.bind(tx)
		repos.claims = &claimSlot{}
		repos.db = claimingConn{Conn: tx, repos: repos}
		err := fn(ctx, repos)
		// A claim that no statement carried goes out now, before COMMIT or
		// ROLLBACK: what it finds comes first, as if it had gone out first.
		if cerr := repos.sendClaim(); cerr != nil {
			return cerr
		}
		return err
	}))
}

// WithoutTx returns repositories that run each statement on the pool, in no
// explicit transaction, with auth, the request's token check, in front of
// the first while it is pending.
func (r *Runner) WithoutTx(auth *app.AuthCheck) app.Repositories {
	return r.bind(r.tx.Pool().Conn(auth))
}

func (r *Runner) bind(db postgres.Conn) *repositories {
	return &repositories{db: db, q: r.q, keys: r.keys, recent: r.recent}
}

// Ping checks that the database answers.
func (r *Runner) Ping(ctx context.Context) error { return r.tx.Ping(ctx) }

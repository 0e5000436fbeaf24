package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// SendBatch sends calls as one batch on db (see Batch).
func SendBatch(ctx context.Context, db DB, calls ...func(dbsqlc.DBTX) error) error {
	var b Batch
	for _, call := range calls {
		b.Add(call)
	}
	return b.Send(ctx, db)
}

// CommitUnsent opens a transaction on pool and commits it before any
// statement was sent, as a use case that decided to do nothing would.
// naive is the commit before it refused a pending token check: with
// nothing sent, it answered success at once.
func CommitUnsent(ctx context.Context, pool *Pool, auth *app.AuthCheck, naive bool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	tx := newTxPipe(conn, pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, auth)
	defer tx.rollback(context.WithoutCancel(ctx))
	if naive && tx.begin != "" && tx.deferred.Len() == 0 {
		return nil
	}
	return tx.commit(ctx)
}

// KeepReadOnlyConns makes r keep a connection whose write was refused as
// read-only: the naive variant that
// TestReadOnlyNodeWritesAreUnavailableAndLeaveThePool must catch.
func KeepReadOnlyConns(r *Runner) { r.keepReadOnlyConns = true }

// TrustCancelledSyncCommits makes pool's commits take a COMMIT whose wait
// for a synchronous standby was cancelled as a success: the naive variant
// that TestFailoverLosesNoAcknowledgedWrite must catch.
func TrustCancelledSyncCommits(pool *Pool) { pool.syncRep.on.Store(false) }

package infra

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
)

// UnfenceMark makes d mark accepted events delivered by id alone, without
// the claim fence: the naive variant that TestBatchMarkIsFencedByClaim must
// catch.
func UnfenceMark(d *Dispatcher) {
	d.mark = func(ctx context.Context, ids []uuid.UUID, _ pgtype.Timestamptz) (int64, error) {
		tag, err := d.pool.Exec(ctx, `UPDATE outbox_events SET state = 'delivered', delivered_at = now(), last_error = NULL
			WHERE id = ANY ($1::uuid[]) AND state = 'claimed'`, ids)
		return tag.RowsAffected(), err
	}
}

// SignAt fixes the clock that signs d's deliveries.
func SignAt(d *Dispatcher, now func() time.Time) {
	d.sink.(*webhook).now = now
}

// SendBatch sends calls as one batch on db (see batch).
func SendBatch(ctx context.Context, db dbtx, calls ...func(dbsqlc.DBTX) error) error {
	var b batch
	for _, call := range calls {
		b.add(call)
	}
	return b.send(ctx, db)
}

// GetOrderStepwise reads an order and then its lines, one statement per
// round trip on repos's connection: the plain path that orderRepo.Get
// batches.
func GetOrderStepwise(ctx context.Context, repos app.Repositories, id uuid.UUID) (*domain.Order, error) {
	r := repos.(*repositories)
	o, err := r.q.OrderGet(ctx, r.db, id)
	if err != nil {
		return nil, translate(err)
	}
	lines, err := r.q.OrderLinesGet(ctx, r.db, []uuid.UUID{id})
	if err != nil {
		return nil, translate(err)
	}
	return toOrder(o, toOrderLines(lines))
}

// Sign is the webhook-signature header that deliveries carry (see sign).
func Sign(keys [][]byte, id, timestamp string, body []byte) string {
	return sign(keys, id, timestamp, body)
}

// CommitUnsent opens a transaction on pool and commits it before any
// statement was sent, as a use case that decided to do nothing would.
// naive is the commit before it refused a pending token check: with
// nothing sent, it answered success at once.
func CommitUnsent(ctx context.Context, pool *pgxpool.Pool, naive bool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	tx := newTxPipe(conn, poolGuards(pool), pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	defer tx.rollback(context.WithoutCancel(ctx))
	if naive && tx.begin != "" && tx.deferred.Len() == 0 {
		return nil
	}
	return tx.commit(ctx)
}

// UnboundSweeps takes the per-batch deadline off p's sweeps: the naive
// variant that TestBackgroundStatementsHaveADeadline must catch.
func UnboundSweeps(p *Purger) { p.deadline = 0 }

// KeepReadOnlyConns makes r keep a connection whose write was refused as
// read-only: the naive variant that
// TestReadOnlyNodeWritesAreUnavailableAndLeaveThePool must catch.
func KeepReadOnlyConns(r *Runner) { r.keepReadOnlyConns = true }

// TrustCancelledSyncCommits makes pool's commits take a COMMIT whose wait
// for a synchronous standby was cancelled as a success: the naive variant
// that TestFailoverLosesNoAcknowledgedWrite must catch.
func TrustCancelledSyncCommits(pool *pgxpool.Pool) {
	on, _ := syncRepWatched.Load(pool)
	on.(*atomic.Bool).Store(false)
}

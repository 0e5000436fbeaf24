package store

import (
	"context"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
)

// FAST PATH (docs/fast-path.md #4): the placement in two batches.
//
// placementRepo is the repositories' placement store (app.PlacementStore),
// pipelined: the statements of ActorRepo.LockForOrder and StockRepo.LockRows
// go out as one batch, those of ActorRepo.ChargeBalance, StockRepo.AddStock
// and OrderRepo.Insert with COMMIT. The server executes a batch's statements
// one after the other in the order queued and stops at the first error, so
// the locks are taken in the same global order (customer, then stock rows by
// product id) and every error is the one the stepwise calls
// (StepwisePlacement) would have returned. It is an optimisation of the
// stepwise path (docs/fast-path.md, row 4): to remove it, delete this file
// and return StepwisePlacement(s) from repositories.Placement.
type placementRepo struct{ *repositories }

var _ app.PlacementStore = placementRepo{}

// LockForPlacement sends the locks in one batch, behind the key's claim
// when one waits to go out (claim_later.go): a placement's first round trip
// is then BEGIN, the guards, the claim with the token check, the key's
// record and both locks. The locks are taken after the claim's wait, in the
// same order as always; when the claim finds the key held, the locks were
// not needed and the transaction rolls back.
func (s placementRepo) LockForPlacement(ctx context.Context, customer uuid.UUID, ids []uuid.UUID) (app.PlacementLocks, error) {
	var out app.PlacementLocks
	var b postgres.Batch
	carried, settle := s.carryClaim(&b)
	var on postgres.DB = s.db
	if carried {
		on = s.db.WithoutAuthCheck() // the claim carries the token check
	}
	b.Add(func(db dbsqlc.DBTX) error {
		row, err := s.q.ActorLockForOrder(ctx, db, customer)
		if err != nil {
			return err
		}
		out.Credit = toCreditState(row)
		return nil
	})
	b.Add(func(db dbsqlc.DBTX) error {
		rows, err := s.q.StockLockRows(ctx, db, ids)
		if err != nil {
			return err
		}
		out.Rows = toStockRows(rows)
		return nil
	})
	if err := settle(b.Send(ctx, on)); err != nil {
		return app.PlacementLocks{}, wrap("placement.lock_for_placement", err)
	}
	return out, nil
}

// FAST PATH (docs/fast-path.md #4, #8): the writes go out with COMMIT.
//
// WritePlacement queues the writes to go out with COMMIT (postgres.Conn's
// AtCommit), ahead of the outbox event and the key record, in the round
// trip that commits: every value is known here (the id, the creation
// time, the amounts), and no write answers anything the placement needs.
// Each write that can refuse fails its statement, so a refusal fails the
// commit and nothing is kept: CHECK (stock >= 0), the order's constraints,
// and the charge's guard, whose refusal is a NOT NULL violation
// (ActorChargeBalance), never a row count read after COMMIT. Under the
// customer's row lock the charge cannot be refused anyway: domain.Place
// checked the limit on the locked row.
func (s placementRepo) WritePlacement(ctx context.Context, o *domain.Order, take map[uuid.UUID]int64) (*domain.Order, error) {
	// The arguments are built once, outside the calls: each call runs twice
	// (postgres.Batch), and a map walked or a clock read inside it would
	// differ between runs.
	at := creationTime()
	charge := dbsqlc.ActorChargeBalanceParams{ID: o.CustomerID(), AmountCents: int64(o.Total())}
	deltas, order, lines := addStockParams(take), orderInsertParams(o, at), orderLinesParams(o)
	for _, call := range []func(db dbsqlc.DBTX) error{
		func(db dbsqlc.DBTX) error { return s.q.ActorChargeBalance(ctx, db, charge) },
		func(db dbsqlc.DBTX) error { return s.q.StockAddDeltas(ctx, db, deltas) },
		func(db dbsqlc.DBTX) error {
			_, err := s.q.OrderInsert(ctx, db, order) // the row is o, as built here
			return err
		},
		func(db dbsqlc.DBTX) error { return s.q.OrderLinesInsert(ctx, db, lines) },
	} {
		if err := s.db.AtCommit(call); err != nil {
			return nil, wrap("placement.write_placement", err)
		}
	}
	return domain.RehydrateOrder(domain.OrderRecord{
		ID: o.ID(), CustomerID: o.CustomerID(), Status: o.Status(), Lines: o.Lines(), Total: o.Total(),
		Version: o.Version(), CreatedAt: at, UpdatedAt: at,
	}), nil
}

package app

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// PlaceOrder places a customer's order and takes its stock.
//
// Invariants: stock never goes below zero (no overselling), and a customer's
// outstanding balance never exceeds their credit limit.
//
// Mechanism, in one READ COMMITTED transaction with no network inside it:
//  1. Lock the customer's actor row FOR NO KEY UPDATE and read its credit
//     state: the limit and the maintained outstanding balance. Every write
//     that moves the balance needs this row, so the balance read stays
//     current until COMMIT, and the customer's placements serialize here.
//  2. Lock every stock row of the order in product id order (SELECT … ORDER
//     BY product_id FOR NO KEY UPDATE OF stock_levels, pattern 3). One global
//     lock order, customer then stock rows by product id, means that orders
//     with reversed lines queue instead of deadlocking. The same statement
//     reads each product's catalogue price without locking the product row:
//     the price taken is the one committed when that statement runs, and a
//     price edit (UpdateProduct) neither waits for a placement nor makes one
//     wait, since the two aggregates share no lock.
//  3. Check every line against the locked stock; one short line rejects the
//     whole order and takes nothing. Then check balance + total against the
//     limit. Nothing sums the customer's orders: the cost does not grow
//     with their history.
//  4. Add the total to the balance (a guarded atomic statement, pattern 2,
//     that refuses to pass the limit), decrement stock, insert the order
//     and its lines, append order.placed to the outbox, and store the
//     idempotency record. CHECK (stock >= 0) and CHECK (balance_cents >= 0)
//     are the last line of defence.
//
// Steps 1 and 2's statements go to the server in one round trip and step
// 4's in another when the repositories pipeline them (PlacementStore); the statements
// and their order are the same either way.
//
// Codes: forbidden (not a customer), unauthenticated (the customer was
// deactivated), validation_failed (unknown product), insufficient_stock,
// credit_limit_exceeded.
type PlaceOrder struct{ Transactor Transactor }

// PlaceOrderCommand is the input of PlaceOrder.
type PlaceOrderCommand struct {
	Lines []domain.LineRequest
}

// Handle runs the command.
func (h PlaceOrder) Handle(ctx context.Context, cmd PlaceOrderCommand, call Call[*domain.Order]) (Outcome, error) {
	if err := requireCustomer(call.Principal); err != nil {
		return Outcome{}, err
	}
	customer := call.Principal.ID
	ids := make([]uuid.UUID, len(cmd.Lines))
	for i, l := range cmd.Lines {
		ids[i] = l.ProductID
	}
	sortIDs(ids)

	return execute(ctx, h.Transactor, ReadCommitted, call, func(ctx context.Context, repos Repositories) (*domain.Order, error) {
		store := placementStore(repos)
		locked, err := store.LockForPlacement(ctx, customer, ids)
		if err != nil {
			return nil, err
		}
		if !locked.Credit.Active {
			return nil, ErrUnauthenticated
		}
		byID := make(map[uuid.UUID]StockRow, len(locked.Rows))
		for _, r := range locked.Rows {
			byID[r.ID] = r
		}
		var v domain.Validation
		lines := make([]domain.OrderLine, len(cmd.Lines))
		take := make(map[uuid.UUID]int64, len(cmd.Lines))
		for i, l := range cmd.Lines {
			r, ok := byID[l.ProductID]
			if !ok {
				v.Add(fmt.Sprintf("lines[%d].product_id", i), "no such product")
				continue
			}
			lines[i] = domain.OrderLine{ProductID: l.ProductID, Quantity: l.Quantity, UnitPrice: r.Price}
			take[l.ProductID] = -int64(l.Quantity)
		}
		if err := v.Err(); err != nil {
			return nil, err
		}
		for _, l := range cmd.Lines {
			if r := byID[l.ProductID]; r.Stock < int64(l.Quantity) {
				return nil, &domain.InsufficientStockError{ProductID: l.ProductID, Requested: int64(l.Quantity), Available: r.Stock}
			}
		}
		id, err := uuid.NewV7()
		if err != nil {
			return nil, err
		}
		order, err := domain.PlaceOrder(id, customer, lines)
		if err != nil {
			return nil, err
		}
		if err := locked.Credit.CheckOrder(order.Total()); err != nil {
			return nil, err
		}
		placed, err := store.WritePlacement(ctx, order, take)
		if err != nil {
			return nil, err
		}
		if err := repos.Outbox().Append(ctx, orderEvent(EventOrderPlaced, placed)); err != nil {
			return nil, err
		}
		return placed, nil
	})
}

// placementStore returns tx's pipelined placement statements when it has
// them, else the same statements one repository call at a time.
func placementStore(repos Repositories) PlacementStore {
	if p, ok := repos.(PlacementStore); ok {
		return p
	}
	return stepwisePlacement{repos}
}

// stepwisePlacement is PlacementStore built from the repositories.
type stepwisePlacement struct{ repos Repositories }

func (s stepwisePlacement) LockForPlacement(ctx context.Context, customer uuid.UUID, ids []uuid.UUID) (PlacementLocks, error) {
	credit, err := s.repos.Actors().LockForOrder(ctx, customer)
	if err != nil || !credit.Active {
		return PlacementLocks{Credit: credit}, err
	}
	rows, err := s.repos.Stock().LockRows(ctx, ids)
	if err != nil {
		return PlacementLocks{}, err
	}
	return PlacementLocks{Credit: credit, Rows: rows}, nil
}

func (s stepwisePlacement) WritePlacement(ctx context.Context, o *domain.Order, take map[uuid.UUID]int64) (*domain.Order, error) {
	ok, err := s.repos.Actors().ChargeBalance(ctx, o.CustomerID(), o.Total())
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrCreditRefused
	}
	if err := s.repos.Stock().AddStock(ctx, take); err != nil {
		return nil, err
	}
	return s.repos.Orders().Insert(ctx, o)
}

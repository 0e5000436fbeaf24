package app

import (
	"context"

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
//  3. Decide on the locked rows (domain.Place): every product known, every
//     line against the locked stock (one short line rejects the whole
//     order and takes nothing), then balance + total against the limit.
//     Nothing sums the customer's orders: the cost does not grow with
//     their history.
//  4. Add the total to the balance (a guarded atomic statement, pattern 2,
//     that refuses to pass the limit), decrement stock, insert the order
//     and its lines, append order.placed to the outbox, and store the
//     idempotency record. CHECK (stock >= 0) and CHECK (balance_cents >= 0)
//     are the last line of defence.
//
// The locks and the writes go through repos.Placement(), whose statements
// are those of the actor, stock and order repositories in this order; the
// service sends steps 1 and 2 in one round trip and step 4 with COMMIT
// (internal/infra/store/placement.go).
//
// Codes: forbidden (not a customer), unauthenticated (the customer was
// deactivated), validation_failed (unknown product), insufficient_stock,
// credit_limit_exceeded.
//
// Patterns and rule ids: docs/patterns.md.
type PlaceOrder struct {
	Transactor Transactor
	Latch      KeyLatch // nil: no in-process latch (execute)
}

// PlaceOrder is the use case wired to the service's transactor and key latch (Deps).
func (u UseCases) PlaceOrder() PlaceOrder {
	return PlaceOrder{Transactor: u.deps.Transactor, Latch: u.deps.Latch}
}

// PlaceOrderCommand is the input of PlaceOrder.
type PlaceOrderCommand struct {
	Lines []domain.LineRequest
}

// Handle runs the command: lock, decide, write, publish.
func (h PlaceOrder) Handle(ctx context.Context, cmd PlaceOrderCommand, call Call[*domain.Order]) (Outcome, error) {
	if err := requireCustomer(call.Principal); err != nil {
		return Outcome{}, err
	}
	customer, ids := call.Principal.ID, productIDs(cmd.Lines)
	return execute(ctx, h.Transactor, h.Latch, ReadCommitted, call, func(ctx context.Context, repos Repositories) (*domain.Order, error) {
		locked, err := repos.Placement().LockForPlacement(ctx, customer, ids)
		if err != nil {
			return nil, err
		}
		placement, err := decide(customer, locked, cmd.Lines)
		if err != nil {
			return nil, err
		}
		placed, err := repos.Placement().WritePlacement(ctx, placement.Order, placement.Take)
		if err != nil {
			return nil, err
		}
		if err := repos.Outbox().Append(ctx, orderEvent(EventOrderPlaced, placed)); err != nil {
			return nil, err
		}
		return placed, nil
	})
}

// decide refuses a customer deactivated since their token was checked, then
// decides the order on the locked rows (domain.Place) under a new id.
func decide(customer uuid.UUID, locked PlacementLocks, lines []domain.LineRequest) (domain.Placement, error) {
	if !locked.Credit.Active {
		return domain.Placement{}, ErrUnauthenticated
	}
	id, err := uuid.NewV7()
	if err != nil {
		return domain.Placement{}, err
	}
	return domain.Place(id, customer, locked.Credit, locked.Rows, lines)
}

// productIDs returns the lines' product ids in the global lock order.
func productIDs(lines []domain.LineRequest) []uuid.UUID {
	ids := make([]uuid.UUID, len(lines))
	for i, l := range lines {
		ids[i] = l.ProductID
	}
	sortIDs(ids)
	return ids
}

// EventOrderPlaced is appended by PlaceOrder, with the order as placed (orderEvent).
var EventOrderPlaced = EventType{"order.placed"}

package app

import (
	"context"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// CancelOrder cancels an order and gives back what it took.
//
// Invariants: only an order the domain lets go is cancelled (Order.Cancel
// says which: never a shipped one), a cancelled order's stock returns exactly
// once, and the customer's balance stops counting a cancelled order exactly
// once: only what the order still owed leaves it, so the balance stays the
// sum over the customer's placed and shipped orders.
//
// Mechanism, in one READ COMMITTED transaction: optimistic concurrency driven
// by If-Match (pattern 4). The domain checks the move on the order as read
// (domain.Order.Cancel), and UPDATE … WHERE id = $1 AND version = $2 stores it
// only if nobody changed the order since. Of a concurrent cancel and ship (or
// payment, which advances the version too) carrying the same ETag, exactly one
// matches the version; the other updates zero rows and gets version_conflict.
// A payment racing the cancellation is so either counted before it (the
// cancel then fails on the version, and its retry with the new ETag is
// decided on the order as paid) or refused after it (its guard refuses a
// cancelled order).
// Only then, in the same transaction and so exactly once, it takes what the
// order still owed (total - paid of the row the guarded update returned, never
// of the row as first read) off the customer's balance with a guarded atomic statement (pattern 2), and
// returns the stock, locking the stock rows FOR NO KEY UPDATE in product id
// order like placement does: order, then customer, then stock rows.
// order.cancelled is appended in the same transaction.
//
// Codes: not_found (missing or another customer's order), version_conflict,
// invalid_transition.
//
// Patterns and rule ids: docs/patterns.md.
type CancelOrder struct {
	Transactor Transactor
	Latch      KeyLatch // nil: no in-process latch (execute)
}

// CancelOrder is the use case wired to the service's transactor and key latch (Deps).
func (u UseCases) CancelOrder() CancelOrder {
	return CancelOrder{Transactor: u.deps.Transactor, Latch: u.deps.Latch}
}

// CancelOrderCommand is the input of CancelOrder.
type CancelOrderCommand struct {
	ID uuid.UUID
	// Expected lists the versions the caller's If-Match names; the move
	// applies when the order is at any of them (RFC 9110 §13.1.1).
	Expected []domain.Version
}

// Handle runs the command.
func (h CancelOrder) Handle(ctx context.Context, cmd CancelOrderCommand, call Call[*domain.Order]) (Outcome, error) {
	return execute(ctx, h.Transactor, h.Latch, ReadCommitted, call, func(ctx context.Context, repos Repositories) (*domain.Order, error) {
		o, err := orderAtVersion(ctx, repos, call.Principal, cmd.ID, cmd.Expected)
		if err != nil {
			return nil, err
		}
		if err := o.Cancel(); err != nil {
			return nil, err
		}
		updated, err := repos.Orders().SetStatus(ctx, o, o.Version())
		if err != nil {
			return nil, err
		}
		if err := repos.Actors().ReleaseBalance(ctx, updated.CustomerID(), updated.Outstanding()); err != nil {
			return nil, err
		}
		if err := returnStock(ctx, repos, o.Lines()); err != nil {
			return nil, err
		}
		if err := repos.Outbox().Append(ctx, orderEvent(EventOrderCancelled, updated)); err != nil {
			return nil, err
		}
		return updated, nil
	})
}

// returnStock gives back the stock of lines, locking their stock rows FOR NO
// KEY UPDATE in the global lock order first, like placement does.
func returnStock(ctx context.Context, repos Repositories, lines []domain.OrderLine) error {
	ids := make([]uuid.UUID, 0, len(lines))
	back := make(map[uuid.UUID]int64, len(lines))
	for _, l := range lines {
		ids = append(ids, l.ProductID)
		back[l.ProductID] += int64(l.Quantity)
	}
	sortIDs(ids)
	if _, err := repos.Stock().LockRows(ctx, ids); err != nil {
		return err
	}
	return repos.Stock().AddStock(ctx, back)
}

// EventOrderCancelled is appended by CancelOrder, with the order as cancelled (orderEvent).
var EventOrderCancelled = EventType{"order.cancelled"}

package app

import (
	"context"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// ShipOrder marks an order shipped.
//
// Invariant: a cancelled order is never shipped. Mechanism, in one READ
// COMMITTED transaction: optimistic concurrency driven by If-Match (pattern
// 4). The domain checks the move on the order as read (domain.Order.Ship),
// and UPDATE … WHERE id = $1 AND version = $2 stores it only if nobody
// changed the order since. Of a concurrent ship and cancel carrying the same
// ETag, exactly one matches the version; the other updates zero rows and gets
// version_conflict. A ship moves neither stock nor balance: a shipped order
// still counts against the customer's credit. order.shipped is appended in the
// same transaction.
//
// Codes: forbidden (a customer shipping), not_found, version_conflict,
// invalid_transition.
type ShipOrder struct {
	Transactor Transactor
	Latch      KeyLatch // nil: no in-process latch (execute)
}

// ShipOrder is the use case wired to the service's transactor and key latch (Deps).
func (u UseCases) ShipOrder() ShipOrder {
	return ShipOrder{Transactor: u.deps.Transactor, Latch: u.deps.Latch}
}

// ShipOrderCommand is the input of ShipOrder.
type ShipOrderCommand struct {
	ID uuid.UUID
	// Expected lists the versions the caller's If-Match names; the move
	// applies when the order is at any of them (RFC 9110 §13.1.1).
	Expected []domain.Version
}

// Handle runs the command.
func (h ShipOrder) Handle(ctx context.Context, cmd ShipOrderCommand, call Call[*domain.Order]) (Outcome, error) {
	if err := requireStaff(call.Principal); err != nil {
		return Outcome{}, err
	}
	return execute(ctx, h.Transactor, h.Latch, ReadCommitted, call, func(ctx context.Context, repos Repositories) (*domain.Order, error) {
		o, err := orderAtVersion(ctx, repos, call.Principal, cmd.ID, cmd.Expected)
		if err != nil {
			return nil, err
		}
		if err := o.Ship(); err != nil {
			return nil, err
		}
		updated, err := repos.Orders().SetStatus(ctx, o, o.Version())
		if err != nil {
			return nil, err
		}
		if err := repos.Outbox().Append(ctx, orderEvent(EventOrderShipped, updated)); err != nil {
			return nil, err
		}
		return updated, nil
	})
}

// EventOrderShipped is appended by ShipOrder, with the order as shipped (orderEvent).
var EventOrderShipped = EventType{"order.shipped"}

package app

import (
	"context"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// AdjustStock adds or removes units of a product.
//
// Invariant: stock is never negative, and an adjustment is applied once.
// Mechanism: one guarded atomic statement on the stock level (pattern 2),
// UPDATE … SET stock = stock + delta WHERE stock + delta >= 0, with no
// If-Match because every stock write commutes; the key (required) makes a
// retry replay rather than apply twice. CHECK (stock >= 0) backs the guard.
// The product row is only read (for the event's sku), never locked or
// changed, so an adjustment never makes a catalogue edit's If-Match stale.
// stock.adjusted is appended in the same transaction. Codes: forbidden,
// validation_failed, not_found, insufficient_stock.
//
// Patterns and rule ids: docs/patterns.md.
type AdjustStock struct {
	Transactor Transactor
	Latch      KeyLatch // nil: no in-process latch (execute)
}

// AdjustStock is the use case wired to the service's transactor and key latch (Deps).
func (u UseCases) AdjustStock() AdjustStock {
	return AdjustStock{Transactor: u.deps.Transactor, Latch: u.deps.Latch}
}

// AdjustStockCommand is the input of AdjustStock.
type AdjustStockCommand struct {
	ProductID uuid.UUID
	Delta     int64
	Reason    string
}

// Handle runs the command.
func (h AdjustStock) Handle(ctx context.Context, cmd AdjustStockCommand, call Call[StockAdjusted]) (Outcome, error) {
	if err := requireStaff(call.Principal); err != nil {
		return Outcome{}, err
	}
	adj, err := domain.NewStockAdjustment(cmd.ProductID, cmd.Delta, cmd.Reason)
	if err != nil {
		return Outcome{}, err
	}
	return execute(ctx, h.Transactor, h.Latch, ReadCommitted, call, func(ctx context.Context, repos Repositories) (StockAdjusted, error) {
		level, err := repos.Stock().Adjust(ctx, call.Principal.ID, adj)
		if err != nil {
			return StockAdjusted{}, err
		}
		p, err := repos.Products().Get(ctx, adj.ProductID)
		if err != nil {
			return StockAdjusted{}, err
		}
		if err := repos.Outbox().Append(ctx, stockEvent(p, adj, level, call.Principal.ID)); err != nil {
			return StockAdjusted{}, err
		}
		return StockAdjusted{Adjustment: adj, Level: level}, nil
	})
}

// StockAdjusted is the result of AdjustStock.
type StockAdjusted struct {
	Adjustment domain.StockAdjustment
	Level      *domain.StockLevel
}

// EventStockAdjusted is appended by AdjustStock.
var EventStockAdjusted = EventType{"stock.adjusted"}

// StockEventData is the data of stock.adjusted: the adjustment and the stock
// after it. Stock taken by orders is reported by the order events instead.
type StockEventData struct {
	ProductID uuid.UUID `json:"product_id"`
	SKU       string    `json:"sku"`
	Delta     int64     `json:"delta"`
	Reason    string    `json:"reason"`
	Stock     int64     `json:"stock"`
	ActorID   uuid.UUID `json:"actor_id"`
}

// stockEvent reports adjustment adj of p's stock by actor, and level after it.
func stockEvent(p *domain.Product, adj domain.StockAdjustment, level *domain.StockLevel, actor uuid.UUID) Event {
	return Event{Type: EventStockAdjusted, AggregateID: p.ID(), Data: StockEventData{
		ProductID: p.ID(), SKU: string(p.SKU()), Delta: adj.Delta, Reason: adj.Reason, Stock: level.Stock(), ActorID: actor,
	}}
}

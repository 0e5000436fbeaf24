package app

import (
	"time"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// EventType names a kind of event. The six values below are the only ones;
// they are part of the external contract (api-contract section 4).
type EventType struct{ name string }

// The event types.
var (
	EventOrderPlaced     = EventType{"order.placed"}
	EventOrderCancelled  = EventType{"order.cancelled"}
	EventOrderShipped    = EventType{"order.shipped"}
	EventPaymentRecorded = EventType{"payment.recorded"}
	EventRefundRecorded  = EventType{"refund.recorded"}
	EventStockAdjusted   = EventType{"stock.adjusted"}
)

func (t EventType) String() string { return t.name }

// Event is a committed state change that other systems care about. A use case
// appends it through Repositories.Outbox in the transaction that makes the
// change, so that the change and its event commit together or not at all. Data is
// marshalled to JSON and delivered as the "data" member of
// {"id","type","occurred_at","data"}; it carries enough for a consumer to act
// without calling the service back.
type Event struct {
	Type        EventType
	AggregateID uuid.UUID
	Data        any
}

// OrderEventData is the data of order.placed, order.cancelled and
// order.shipped: the order as it stands after the change, in the shape the
// API returns it. For order.cancelled the lines are the stock given back.
type OrderEventData struct {
	ID            uuid.UUID            `json:"id"`
	CustomerID    uuid.UUID            `json:"customer_id"`
	Status        string               `json:"status"`
	Lines         []OrderLineEventData `json:"lines"`
	TotalCents    int64                `json:"total_cents"`
	PaidCents     int64                `json:"paid_cents"`
	RefundedCents int64                `json:"refunded_cents"`
	CreatedAt     time.Time            `json:"created_at"`
	UpdatedAt     time.Time            `json:"updated_at"`
}

// OrderLineEventData is one line of an order event.
type OrderLineEventData struct {
	ProductID      uuid.UUID `json:"product_id"`
	Quantity       int64     `json:"quantity"`
	UnitPriceCents int64     `json:"unit_price_cents"`
}

// PaymentEventData is the data of payment.recorded: the payment and the
// order's totals after it, so a consumer can tell a part payment from a full
// one.
type PaymentEventData struct {
	OrderID     uuid.UUID `json:"order_id"`
	CustomerID  uuid.UUID `json:"customer_id"`
	AmountCents int64     `json:"amount_cents"`
	PaidCents   int64     `json:"paid_cents"`
	TotalCents  int64     `json:"total_cents"`
	OrderStatus string    `json:"order_status"`
}

// RefundEventData is the data of refund.recorded: the refund, who gave it
// and why, and the order's amounts after it, so a consumer can tell a part
// refund from a full one.
type RefundEventData struct {
	OrderID       uuid.UUID `json:"order_id"`
	CustomerID    uuid.UUID `json:"customer_id"`
	AmountCents   int64     `json:"amount_cents"`
	Reason        string    `json:"reason"`
	RefundedCents int64     `json:"refunded_cents"`
	PaidCents     int64     `json:"paid_cents"`
	ActorID       uuid.UUID `json:"actor_id"`
}

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

// The events' constructors: each use case appends the one of its change, built
// here from the aggregate as it stands after the change.

// orderEvent builds the event that reports o's latest change.
func orderEvent(t EventType, o *domain.Order) Event {
	lines := make([]OrderLineEventData, len(o.Lines()))
	for i, l := range o.Lines() {
		lines[i] = OrderLineEventData{ProductID: l.ProductID, Quantity: int64(l.Quantity), UnitPriceCents: int64(l.UnitPrice)}
	}
	return Event{Type: t, AggregateID: o.ID(), Data: OrderEventData{
		ID: o.ID(), CustomerID: o.CustomerID(), Status: o.Status().String(), Lines: lines,
		TotalCents: int64(o.Total()), PaidCents: int64(o.Paid()), RefundedCents: int64(o.Refunded()),
		CreatedAt: o.CreatedAt().UTC(), UpdatedAt: o.UpdatedAt().UTC(),
	}}
}

// paymentEvent reports a payment of amount on o.
func paymentEvent(o *domain.Order, amount domain.Cents) Event {
	return Event{Type: EventPaymentRecorded, AggregateID: o.ID(), Data: PaymentEventData{
		OrderID: o.ID(), CustomerID: o.CustomerID(), AmountCents: int64(amount),
		PaidCents: int64(o.Paid()), TotalCents: int64(o.Total()), OrderStatus: o.Status().String(),
	}}
}

// refundEvent reports refund r on o, given by actor.
func refundEvent(o *domain.Order, r domain.Refund, actor uuid.UUID) Event {
	return Event{Type: EventRefundRecorded, AggregateID: o.ID(), Data: RefundEventData{
		OrderID: o.ID(), CustomerID: o.CustomerID(), AmountCents: int64(r.Amount), Reason: r.Reason,
		RefundedCents: int64(o.Refunded()), PaidCents: int64(o.Paid()), ActorID: actor,
	}}
}

// stockEvent reports adjustment adj of p's stock by actor, and level after it.
func stockEvent(p *domain.Product, adj domain.StockAdjustment, level *domain.StockLevel, actor uuid.UUID) Event {
	return Event{Type: EventStockAdjusted, AggregateID: p.ID(), Data: StockEventData{
		ProductID: p.ID(), SKU: string(p.SKU()), Delta: adj.Delta, Reason: adj.Reason, Stock: level.Stock(), ActorID: actor,
	}}
}

package app

import (
	"time"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// EventType names a kind of event. Its values are part of the external
// contract (api-contract section 4). Each value, with its payload and
// constructor, is declared in the file of the use case that appends it
// (EventPaymentRecorded in record_payment.go, …); what several events share
// stays here: Event, EventType and the order's representation (OrderData,
// which the API's answers share) with orderEvent. docs/events.md lists
// every type, and a new one is also added to the outbox's CHECK (a
// migration) and to the enum in openapi.yaml;
// TestEveryEventTypeIsAllowedAndDocumented (internal/httpapi) finds each
// value here and fails until all three list it.
type EventType struct{ name string }

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

// OrderData is an order as it stands after its latest change, as the API
// returns it and as the order events (order.placed, order.cancelled,
// order.shipped) carry it: the contract says the two are the same (api-contract
// section 4, docs/events.md), so they are one type, and a member added to the
// order goes into both at once. For order.cancelled the lines are the stock
// given back.
type OrderData struct {
	ID            uuid.UUID       `json:"id"`
	CustomerID    uuid.UUID       `json:"customer_id"`
	Status        string          `json:"status"`
	Lines         []OrderLineData `json:"lines"`
	TotalCents    int64           `json:"total_cents"`
	PaidCents     int64           `json:"paid_cents"`
	RefundedCents int64           `json:"refunded_cents"`
	CreatedAt     time.Time       `json:"created_at"`
	UpdatedAt     time.Time       `json:"updated_at"`
}

// OrderLineData is one line of an OrderData.
type OrderLineData struct {
	ProductID      uuid.UUID `json:"product_id"`
	Quantity       int64     `json:"quantity"`
	UnitPriceCents int64     `json:"unit_price_cents"`
}

// NewOrderData is o as the API returns it and the order events carry it.
func NewOrderData(o *domain.Order) OrderData {
	lines := make([]OrderLineData, len(o.Lines()))
	for i, l := range o.Lines() {
		lines[i] = OrderLineData{ProductID: l.ProductID, Quantity: int64(l.Quantity), UnitPriceCents: int64(l.UnitPrice)}
	}
	return OrderData{
		ID: o.ID(), CustomerID: o.CustomerID(), Status: o.Status().String(), Lines: lines,
		TotalCents: int64(o.Total()), PaidCents: int64(o.Paid()), RefundedCents: int64(o.Refunded()),
		CreatedAt: o.CreatedAt().UTC(), UpdatedAt: o.UpdatedAt().UTC(),
	}
}

// orderEvent builds the event that reports o's latest change, from o as it
// stands after the change. The other events' payloads and constructors are in
// the file of the use case that appends them.
func orderEvent(t EventType, o *domain.Order) Event {
	return Event{Type: t, AggregateID: o.ID(), Data: NewOrderData(o)}
}

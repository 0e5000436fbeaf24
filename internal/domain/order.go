package domain

import (
	"fmt"
	"time"

	"github.com/google/uuid"
)

// The outcomes of the order's rules.
const (
	// CodeInvalidTransition: the order's status does not allow the change.
	CodeInvalidTransition Code = "invalid_transition"
	// CodeOverpayment: a payment exceeds what is still owed.
	CodeOverpayment Code = "overpayment"
	// CodeOverRefund: a refund exceeds what was paid and not yet refunded.
	CodeOverRefund Code = "over_refund"
)

// OrderStatus is where an order is in its life: placed, then shipped or
// cancelled. The zero value is no status; the three statuses are the only values.
type OrderStatus struct{ name string }

// The order statuses.
var (
	StatusPlaced    = OrderStatus{"placed"}
	StatusShipped   = OrderStatus{"shipped"}
	StatusCancelled = OrderStatus{"cancelled"}
)

// ParseOrderStatus accepts a stored status name.
func ParseOrderStatus(v string) (OrderStatus, error) {
	for _, s := range []OrderStatus{StatusPlaced, StatusShipped, StatusCancelled} {
		if s.name == v {
			return s, nil
		}
	}
	return OrderStatus{}, fmt.Errorf("unknown order status %q", v)
}

func (s OrderStatus) String() string { return s.name }

// Order line bounds.
const (
	MinOrderLines = 1
	MaxOrderLines = 50
)

// OrderLine is one product on an order, priced at placement.
type OrderLine struct {
	ProductID uuid.UUID
	Quantity  Quantity
	UnitPrice Cents
}

// LineRequest is what a customer asks for on one line, before pricing.
type LineRequest struct {
	ProductID uuid.UUID
	Quantity  Quantity
}

// ParseLineRequests validates the requested lines: 1 to 50, each quantity 1
// to 1000, and a product at most once.
func ParseLineRequests(productIDs []string, quantities []int64) ([]LineRequest, error) {
	var v Validation
	if len(productIDs) < MinOrderLines || len(productIDs) > MaxOrderLines {
		v.Add("lines", fmt.Sprintf("must have %d to %d lines", MinOrderLines, MaxOrderLines))
	}
	lines := make([]LineRequest, len(productIDs))
	seen := make(map[uuid.UUID]int, len(productIDs))
	for i := range productIDs {
		id, err := uuid.Parse(productIDs[i])
		if err != nil {
			v.Add(fmt.Sprintf("lines[%d].product_id", i), "must be a UUID")
		} else if first, dup := seen[id]; dup {
			v.Add(fmt.Sprintf("lines[%d].product_id", i), fmt.Sprintf("repeats lines[%d]; order a product on one line", first))
		} else {
			seen[id] = i
		}
		q, err := ParseQuantity(quantities[i])
		v.Merge(fmt.Sprintf("lines[%d].quantity", i), err)
		lines[i] = LineRequest{ProductID: id, Quantity: q}
	}
	return lines, v.Err()
}

// Order is a customer's order. Invariants it guards itself: a transition
// happens only from placed; paid never exceeds total; only a cancelled order
// is refunded, and refunded never exceeds paid. The version is the
// optimistic-concurrency token.
type Order struct {
	id         uuid.UUID
	customerID uuid.UUID
	status     OrderStatus
	lines      []OrderLine
	total      Cents
	paid       Cents
	refunded   Cents
	version    Version
	createdAt  time.Time
	updatedAt  time.Time
}

// PlaceOrder builds a new placed order from priced lines and computes its total.
func PlaceOrder(id, customerID uuid.UUID, lines []OrderLine) (*Order, error) {
	if len(lines) < MinOrderLines || len(lines) > MaxOrderLines {
		return nil, Errorf(CodeValidation, "an order has %d to %d lines", MinOrderLines, MaxOrderLines)
	}
	var total Cents
	for _, l := range lines {
		total += l.UnitPrice * Cents(l.Quantity)
	}
	return &Order{id: id, customerID: customerID, status: StatusPlaced, lines: lines, total: total, version: 1}, nil
}

// OrderRecord is an order as storage holds it: what RehydrateOrder takes.
// Its fields are named, so a field added to the order is set where it is
// stored and read; callers that do not know a new field leave it zero and
// need no change.
type OrderRecord struct {
	ID         uuid.UUID
	CustomerID uuid.UUID
	Status     OrderStatus
	Lines      []OrderLine
	Total      Cents
	Paid       Cents
	Refunded   Cents
	Version    Version
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// RehydrateOrder rebuilds an order from storage. Only repositories (and
// tests) call it.
func RehydrateOrder(r OrderRecord) *Order {
	return &Order{id: r.ID, customerID: r.CustomerID, status: r.Status, lines: r.Lines, total: r.Total, paid: r.Paid,
		refunded: r.Refunded, version: r.Version, createdAt: r.CreatedAt, updatedAt: r.UpdatedAt}
}

func (o *Order) ID() uuid.UUID         { return o.id }
func (o *Order) CustomerID() uuid.UUID { return o.customerID }
func (o *Order) Status() OrderStatus   { return o.status }
func (o *Order) Lines() []OrderLine    { return o.lines }
func (o *Order) Total() Cents          { return o.total }
func (o *Order) Paid() Cents           { return o.paid }
func (o *Order) Refunded() Cents       { return o.refunded }
func (o *Order) Outstanding() Cents    { return o.total - o.paid }
func (o *Order) Version() Version      { return o.version }
func (o *Order) CreatedAt() time.Time  { return o.createdAt }
func (o *Order) UpdatedAt() time.Time  { return o.updatedAt }

// VisibleTo says whether actor may see the order: staff see every order,
// a customer only their own.
func (o *Order) VisibleTo(actorID uuid.UUID, role Role) bool {
	return role == RoleStaff || o.customerID == actorID
}

// Cancel moves a placed order to cancelled. An order paid in part (or in
// full) may be cancelled: what was paid stays recorded in paid and becomes
// refundable (CheckRefund); what was still owed is no longer owed.
func (o *Order) Cancel() error {
	if o.status != StatusPlaced {
		return Errorf(CodeInvalidTransition, "order is %s; only a placed order can be cancelled", o.status)
	}
	o.status = StatusCancelled
	return nil
}

// Ship moves a placed order to shipped.
func (o *Order) Ship() error {
	if o.status != StatusPlaced {
		return Errorf(CodeInvalidTransition, "order is %s; only a placed order can be shipped", o.status)
	}
	o.status = StatusShipped
	return nil
}

// CheckPayment says whether a payment of amount may be recorded: never on a
// cancelled order, never beyond the total.
func (o *Order) CheckPayment(amount Cents) error {
	if o.status == StatusCancelled {
		return Errorf(CodeInvalidTransition, "order is cancelled; it takes no payments")
	}
	if o.paid+amount > o.total {
		return Errorf(CodeOverpayment, "payment of %d cents exceeds the remaining balance of %d cents", amount, o.total-o.paid)
	}
	return nil
}

// ParsePayment accepts a positive amount.
func ParsePayment(amountCents int64) (Cents, error) {
	var v Validation
	if amountCents < 1 || Cents(amountCents) > MaxCents {
		v.Add("amount_cents", fmt.Sprintf("must be between 1 and %d", MaxCents))
	}
	return Cents(amountCents), v.Err()
}

// Refund is money given back on a cancelled order, with the reason staff
// give for it.
type Refund struct {
	Amount Cents
	Reason string
}

// ParseRefund accepts a positive amount and a reason of one line of text
// (ParseName).
func ParseRefund(amountCents int64, reason string) (Refund, error) {
	var v Validation
	if amountCents < 1 || Cents(amountCents) > MaxCents {
		v.Add("amount_cents", fmt.Sprintf("must be between 1 and %d", MaxCents))
	}
	r, err := ParseName(reason)
	v.Merge("reason", err)
	return Refund{Amount: Cents(amountCents), Reason: r}, v.Err()
}

// CheckRefund says whether a refund of amount may be recorded: only on a
// cancelled order (a placed or shipped order still owes or has its goods),
// and never beyond what was paid and not yet refunded.
func (o *Order) CheckRefund(amount Cents) error {
	if o.status != StatusCancelled {
		return Errorf(CodeInvalidTransition, "order is %s; only a cancelled order is refunded", o.status)
	}
	if o.refunded+amount > o.paid {
		return Errorf(CodeOverRefund, "refund of %d cents exceeds the %d cents paid and not yet refunded", amount, o.paid-o.refunded)
	}
	return nil
}

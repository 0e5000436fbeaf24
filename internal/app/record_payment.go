package app

import (
	"context"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// RecordPayment records a payment against an order.
//
// Invariants: paid_cents never exceeds total_cents, a cancelled order takes no
// payment, a payment is counted once, and the customer's balance goes down by
// exactly what was paid. Mechanism: one guarded atomic increment (pattern 2),
// UPDATE … SET paid_cents = paid_cents + n WHERE paid_cents + n <= total_cents
// AND status <> 'cancelled', backed by a CHECK constraint; then, in the same
// transaction, UPDATE actors SET balance_cents = balance_cents - n (guarded,
// pattern 2): concurrent payments and placements of one customer queue on
// that row and none is lost. The required key makes a retried payment replay
// instead of counting twice. payment.recorded is appended in the same
// transaction.
//
// Codes: not_found (missing or another customer's order), invalid_transition
// (cancelled), overpayment.
//
// Patterns and rule ids: docs/patterns.md.
type RecordPayment struct {
	Transactor Transactor
	Latch      KeyLatch // nil: no in-process latch (execute)
}

// RecordPayment is the use case wired to the service's transactor and key latch (Deps).
func (u UseCases) RecordPayment() RecordPayment {
	return RecordPayment{Transactor: u.deps.Transactor, Latch: u.deps.Latch}
}

// RecordPaymentCommand is the input of RecordPayment.
type RecordPaymentCommand struct {
	OrderID uuid.UUID
	Amount  domain.Cents
}

// PaymentRecorded is the result of RecordPayment.
type PaymentRecorded struct {
	OrderID uuid.UUID
	Amount  domain.Cents
	Paid    domain.Cents
}

// Handle runs the command.
func (h RecordPayment) Handle(ctx context.Context, cmd RecordPaymentCommand, call Call[PaymentRecorded]) (Outcome, error) {
	p := call.Principal
	return execute(ctx, h.Transactor, h.Latch, ReadCommitted, call, func(ctx context.Context, repos Repositories) (PaymentRecorded, error) {
		if _, err := visibleOrder(ctx, repos, p, cmd.OrderID); err != nil {
			return PaymentRecorded{}, err
		}
		updated, ok, err := repos.Orders().AddPayment(ctx, cmd.OrderID, p.ID, cmd.Amount)
		if err != nil {
			return PaymentRecorded{}, err
		}
		if !ok {
			return PaymentRecorded{}, paymentRefused(ctx, repos, cmd)
		}
		if err := repos.Actors().ReleaseBalance(ctx, updated.CustomerID(), cmd.Amount); err != nil {
			return PaymentRecorded{}, err
		}
		if err := repos.Outbox().Append(ctx, paymentEvent(updated, cmd.Amount)); err != nil {
			return PaymentRecorded{}, err
		}
		return PaymentRecorded{OrderID: updated.ID(), Amount: cmd.Amount, Paid: updated.Paid()}, nil
	})
}

// paymentRefused says why the payment's guard refused, from the order as it
// is now (domain.Order.CheckPayment).
func paymentRefused(ctx context.Context, repos Repositories, cmd RecordPaymentCommand) error {
	now, err := repos.Orders().Get(ctx, cmd.OrderID)
	if err != nil {
		return err
	}
	if err := now.CheckPayment(cmd.Amount); err != nil {
		return err
	}
	return domain.Errorf(domain.CodeOverpayment, "payment of %d cents exceeds the remaining balance", cmd.Amount)
}

// EventPaymentRecorded is appended by RecordPayment.
var EventPaymentRecorded = EventType{"payment.recorded"}

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

// paymentEvent reports a payment of amount on o.
func paymentEvent(o *domain.Order, amount domain.Cents) Event {
	return Event{Type: EventPaymentRecorded, AggregateID: o.ID(), Data: PaymentEventData{
		OrderID: o.ID(), CustomerID: o.CustomerID(), AmountCents: int64(amount),
		PaidCents: int64(o.Paid()), TotalCents: int64(o.Total()), OrderStatus: o.Status().String(),
	}}
}

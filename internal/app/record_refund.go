package app

import (
	"context"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// RecordRefund gives back money paid on a cancelled order.
//
// Invariants: refunded_cents never exceeds paid_cents, only a cancelled
// order is refunded, and a refund is counted once. Mechanism, in one READ
// COMMITTED transaction: one guarded atomic increment (pattern 2), UPDATE … SET refunded_cents = refunded_cents
// + n WHERE status = 'cancelled' AND refunded_cents + n <= paid_cents, backed
// by the CHECK orders_refund_within_paid; concurrent refunds of one order
// queue on its row lock and each re-evaluates the guard on the row the one
// before it committed, so none is lost and together they never pass what was
// paid. A payment racing the cancellation cannot slip in after it: the
// payment's own guard refuses a cancelled order (RecordPayment), so every
// payment an order keeps was counted before it was cancelled, and is
// refundable. The balance does not move: a cancelled order owes nothing, so
// it no longer counts in the customer's balance whatever is refunded. The
// required key makes a retried refund replay instead of counting twice.
// refund.recorded is appended in the same transaction.
//
// Codes: forbidden (a customer refunding), not_found, invalid_transition (not
// cancelled), over_refund.
//
// Patterns and rule ids: docs/patterns.md.
type RecordRefund struct {
	Transactor Transactor
	Latch      KeyLatch // nil: no in-process latch (execute)
}

// RecordRefund is the use case wired to the service's transactor and key latch (Deps).
func (u UseCases) RecordRefund() RecordRefund {
	return RecordRefund{Transactor: u.deps.Transactor, Latch: u.deps.Latch}
}

// RecordRefundCommand is the input of RecordRefund.
type RecordRefundCommand struct {
	OrderID uuid.UUID
	Refund  domain.Refund
}

// RefundRecorded is the result of RecordRefund.
type RefundRecorded struct {
	OrderID  uuid.UUID
	Amount   domain.Cents
	Refunded domain.Cents
}

// Handle runs the command.
func (h RecordRefund) Handle(ctx context.Context, cmd RecordRefundCommand, call Call[RefundRecorded]) (Outcome, error) {
	p := call.Principal
	if err := requireStaff(p); err != nil {
		return Outcome{}, err
	}
	return execute(ctx, h.Transactor, h.Latch, ReadCommitted, call, func(ctx context.Context, repos Repositories) (RefundRecorded, error) {
		updated, ok, err := repos.Orders().AddRefund(ctx, cmd.OrderID, p.ID, cmd.Refund)
		if err != nil {
			return RefundRecorded{}, err
		}
		if !ok {
			return RefundRecorded{}, refundRefused(ctx, repos, cmd)
		}
		if err := repos.Outbox().Append(ctx, refundEvent(updated, cmd.Refund, p.ID)); err != nil {
			return RefundRecorded{}, err
		}
		return RefundRecorded{OrderID: updated.ID(), Amount: cmd.Refund.Amount, Refunded: updated.Refunded()}, nil
	})
}

// refundRefused says why the refund's guard refused, from the order as it is
// now (domain.Order.CheckRefund). The order read here may already differ
// from the row the guard saw (another refund committed in between, making
// room or not): when the check now passes, the guard refused on the amount,
// so the answer is over_refund.
func refundRefused(ctx context.Context, repos Repositories, cmd RecordRefundCommand) error {
	now, err := repos.Orders().Get(ctx, cmd.OrderID)
	if err != nil {
		return err
	}
	if err := now.CheckRefund(cmd.Refund.Amount); err != nil {
		return err
	}
	return domain.Errorf(domain.CodeOverRefund, "refund of %d cents exceeds what was paid and not yet refunded", cmd.Refund.Amount)
}

// EventRefundRecorded is appended by RecordRefund.
var EventRefundRecorded = EventType{"refund.recorded"}

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

// refundEvent reports refund r on o, given by actor.
func refundEvent(o *domain.Order, r domain.Refund, actor uuid.UUID) Event {
	return Event{Type: EventRefundRecorded, AggregateID: o.ID(), Data: RefundEventData{
		OrderID: o.ID(), CustomerID: o.CustomerID(), AmountCents: int64(r.Amount), Reason: r.Reason,
		RefundedCents: int64(o.Refunded()), PaidCents: int64(o.Paid()), ActorID: actor,
	}}
}

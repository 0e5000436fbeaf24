package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

type orderLineJSON struct {
	ProductID      uuid.UUID `json:"product_id"`
	Quantity       int32     `json:"quantity"`
	UnitPriceCents int64     `json:"unit_price_cents"`
}

type orderJSON struct {
	ID            uuid.UUID       `json:"id"`
	CustomerID    uuid.UUID       `json:"customer_id"`
	Status        string          `json:"status"`
	Lines         []orderLineJSON `json:"lines"`
	TotalCents    int64           `json:"total_cents"`
	PaidCents     int64           `json:"paid_cents"`
	RefundedCents int64           `json:"refunded_cents"`
	CreatedAt     time.Time       `json:"created_at"`
	UpdatedAt     time.Time       `json:"updated_at"`
}

func toOrderJSON(o *domain.Order) orderJSON {
	lines := make([]orderLineJSON, len(o.Lines()))
	for i, l := range o.Lines() {
		lines[i] = orderLineJSON{ProductID: l.ProductID, Quantity: int32(l.Quantity), UnitPriceCents: int64(l.UnitPrice)}
	}
	return orderJSON{
		ID: o.ID(), CustomerID: o.CustomerID(), Status: o.Status().String(), Lines: lines,
		TotalCents: int64(o.Total()), PaidCents: int64(o.Paid()), RefundedCents: int64(o.Refunded()),
		CreatedAt: o.CreatedAt().UTC(), UpdatedAt: o.UpdatedAt().UTC(),
	}
}

type placeOrderIn struct {
	Lines *[]orderLineIn `json:"lines"`
}

type orderLineIn struct {
	ProductID *string `json:"product_id"`
	Quantity  *int64  `json:"quantity"`
}

func (s *Server) placeOrder(op operation) http.Handler {
	return keyed(s, op, placeOrderIn.command, s.app.PlaceOrder.Handle, entity(toOrderJSON, op.route))
}

// command checks that every line names a product and a quantity, then
// parses the lines.
func (in placeOrderIn) command(target) (app.PlaceOrderCommand, error) {
	var v domain.Validation
	required(&v, "lines", in.Lines)
	if err := v.Err(); err != nil {
		return app.PlaceOrderCommand{}, err
	}
	ids := make([]string, len(*in.Lines))
	qty := make([]int64, len(*in.Lines))
	for i, l := range *in.Lines {
		at := "lines[" + strconv.Itoa(i) + "]"
		required(&v, at+".product_id", l.ProductID)
		required(&v, at+".quantity", l.Quantity)
		if l.ProductID != nil && l.Quantity != nil {
			ids[i], qty[i] = *l.ProductID, *l.Quantity
		}
	}
	if err := v.Err(); err != nil {
		return app.PlaceOrderCommand{}, err
	}
	lines, err := domain.ParseLineRequests(ids, qty)
	return app.PlaceOrderCommand{Lines: lines}, err
}

func (s *Server) getOrder(operation) http.Handler {
	return getOne(s, func(ctx context.Context, auth *app.AuthCheck, id uuid.UUID, seen app.Seen) (*domain.Order, error) {
		return s.app.GetOrder.Handle(ctx, auth, callerOf(ctx).principal, id, seen)
	}, toOrderJSON)
}

func (s *Server) listOrders(operation) http.Handler {
	return listPage(s, func(ctx context.Context, auth *app.AuthCheck, page app.Page) ([]*domain.Order, error) {
		return s.app.ListOrders.Handle(ctx, auth, callerOf(ctx).principal, page)
	}, (*domain.Order).ID, toOrderJSON)
}

// cancelOrder and shipOrder take no body and require If-Match.
func (s *Server) cancelOrder(op operation) http.Handler {
	return keyed(s, op, func(_ noBody, at target) (app.CancelOrderCommand, error) {
		return app.CancelOrderCommand{ID: at.id, Expected: at.expected}, nil
	}, s.app.CancelOrder.Handle, entity(toOrderJSON, ""))
}

func (s *Server) shipOrder(op operation) http.Handler {
	return keyed(s, op, func(_ noBody, at target) (app.ShipOrderCommand, error) {
		return app.ShipOrderCommand{ID: at.id, Expected: at.expected}, nil
	}, s.app.ShipOrder.Handle, entity(toOrderJSON, ""))
}

type paymentIn struct {
	AmountCents *int64 `json:"amount_cents"`
}

func (in paymentIn) command(at target) (app.RecordPaymentCommand, error) {
	var v domain.Validation
	required(&v, "amount_cents", in.AmountCents)
	if err := v.Err(); err != nil {
		return app.RecordPaymentCommand{}, err
	}
	amount, err := domain.ParsePayment(*in.AmountCents)
	return app.RecordPaymentCommand{OrderID: at.id, Amount: amount}, err
}

type paymentJSON struct {
	OrderID     uuid.UUID `json:"order_id"`
	AmountCents int64     `json:"amount_cents"`
	PaidCents   int64     `json:"paid_cents"`
}

func (s *Server) recordPayment(op operation) http.Handler {
	return keyed(s, op, paymentIn.command, s.app.RecordPayment.Handle, func(p app.PaymentRecorded) (any, map[string]string) {
		return paymentJSON{OrderID: p.OrderID, AmountCents: int64(p.Amount), PaidCents: int64(p.Paid)}, nil
	})
}

type refundIn struct {
	AmountCents *int64  `json:"amount_cents"`
	Reason      *string `json:"reason"`
}

func (in refundIn) command(at target) (app.RecordRefundCommand, error) {
	var v domain.Validation
	required(&v, "amount_cents", in.AmountCents)
	required(&v, "reason", in.Reason)
	if err := v.Err(); err != nil {
		return app.RecordRefundCommand{}, err
	}
	refund, err := domain.ParseRefund(*in.AmountCents, *in.Reason)
	return app.RecordRefundCommand{OrderID: at.id, Refund: refund}, err
}

type refundJSON struct {
	OrderID       uuid.UUID `json:"order_id"`
	AmountCents   int64     `json:"amount_cents"`
	RefundedCents int64     `json:"refunded_cents"`
}

func (s *Server) recordRefund(op operation) http.Handler {
	return keyed(s, op, refundIn.command, s.app.RecordRefund.Handle, func(f app.RefundRecorded) (any, map[string]string) {
		return refundJSON{OrderID: f.OrderID, AmountCents: int64(f.Amount), RefundedCents: int64(f.Refunded)}, nil
	})
}

type actorJSON struct {
	ID               uuid.UUID `json:"id"`
	Name             string    `json:"name"`
	Role             string    `json:"role"`
	Active           bool      `json:"active"`
	CreditLimitCents int64     `json:"credit_limit_cents"`
	CreatedAt        time.Time `json:"created_at"`
}

func (s *Server) deactivateActor(op operation) http.Handler {
	return keyed(s, op, func(_ noBody, at target) (app.DeactivateActorCommand, error) {
		return app.DeactivateActorCommand{ID: at.id}, nil
	}, s.app.DeactivateActor.Handle, func(a domain.Actor) (any, map[string]string) {
		return actorJSON{ID: a.ID, Name: a.Name, Role: a.Role.String(), Active: a.Active,
			CreditLimitCents: int64(a.CreditLimitCents), CreatedAt: a.CreatedAt.UTC()}, nil
	})
}

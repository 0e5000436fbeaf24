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

// orderOperations are the order operations, in the order of openapi.yaml
// (operations.go joins the lists).
func orderOperations() []operation {
	return []operation{
		{name: "placeOrder", method: "POST", route: "/v1/orders", status: 201, key: keyRequired, access: app.CustomersOnly,
			serve: (*Server).placeOrder, forms: forms(formOf(1, func(c app.PlaceOrderCommand) canonical {
				lines := make([]canonical, len(c.Lines)) // in the order sent: it is the order's line order
				for i, l := range c.Lines {
					lines[i] = canonical{"product_id": id(l.ProductID), "quantity": int64(l.Quantity)}
				}
				return canonical{"lines": lines}
			}), legacyForm("POST", "/v1/orders", nil, func(c app.PlaceOrderCommand) any {
				type line struct {
					ProductID uuid.UUID
					Quantity  int32
				}
				lines := make([]line, len(c.Lines))
				for i, l := range c.Lines {
					lines[i] = line{l.ProductID, int32(l.Quantity)}
				}
				return struct{ Lines []line }{lines}
			}))},
		{name: "listOrders", method: "GET", route: "/v1/orders", status: 200, serve: (*Server).listOrders},
		{name: "getOrder", method: "GET", route: "/v1/orders/{id}", status: 200, serve: (*Server).getOrder},
		{name: "cancelOrder", method: "POST", route: "/v1/orders/{id}/cancel", status: 200, key: keyAccepted, ifMatch: true,
			serve: (*Server).cancelOrder, forms: forms(formOf(1, func(c app.CancelOrderCommand) canonical {
				return canonical{"order_id": id(c.ID), "if_match": versionSet(c.Expected)}
			}), legacyForm("POST", "/v1/orders/{id}/cancel", func(c app.CancelOrderCommand) uuid.UUID { return c.ID }, func(c app.CancelOrderCommand) any {
				return struct {
					ID       uuid.UUID
					Expected []int64
				}{c.ID, versionList(c.Expected)}
			}))},
		{name: "shipOrder", method: "POST", route: "/v1/orders/{id}/ship", status: 200, key: keyAccepted, ifMatch: true, access: app.StaffOnly,
			serve: (*Server).shipOrder, forms: forms(formOf(1, func(c app.ShipOrderCommand) canonical {
				return canonical{"order_id": id(c.ID), "if_match": versionSet(c.Expected)}
			}), legacyForm("POST", "/v1/orders/{id}/ship", func(c app.ShipOrderCommand) uuid.UUID { return c.ID }, func(c app.ShipOrderCommand) any {
				return struct {
					ID       uuid.UUID
					Expected []int64
				}{c.ID, versionList(c.Expected)}
			}))},
		{name: "recordPayment", method: "POST", route: "/v1/orders/{id}/payments", status: 201, key: keyRequired,
			serve: (*Server).recordPayment, forms: forms(formOf(1, func(c app.RecordPaymentCommand) canonical {
				return canonical{"order_id": id(c.OrderID), "amount_cents": int64(c.Amount)}
			}), legacyForm("POST", "/v1/orders/{id}/payments", func(c app.RecordPaymentCommand) uuid.UUID { return c.OrderID }, func(c app.RecordPaymentCommand) any {
				return struct {
					OrderID uuid.UUID
					Amount  int64
				}{c.OrderID, int64(c.Amount)}
			}))},
		{name: "recordRefund", method: "POST", route: "/v1/orders/{id}/refunds", status: 201, key: keyRequired, access: app.StaffOnly,
			serve: (*Server).recordRefund, forms: forms(formOf(1, func(c app.RecordRefundCommand) canonical {
				return canonical{"order_id": id(c.OrderID), "amount_cents": int64(c.Refund.Amount), "reason": c.Refund.Reason}
			}))},
	}
}

// actorOperations are the operations on actors (operations.go joins the
// lists).
func actorOperations() []operation {
	return []operation{
		{name: "deactivateActor", method: "POST", route: "/v1/actors/{id}/deactivate", status: 200, key: keyAccepted, access: app.StaffOnly,
			serve: (*Server).deactivateActor, forms: forms(formOf(1, func(c app.DeactivateActorCommand) canonical {
				return canonical{"actor_id": id(c.ID)}
			}), legacyForm("POST", "/v1/actors/{id}/deactivate", func(c app.DeactivateActorCommand) uuid.UUID { return c.ID }, func(c app.DeactivateActorCommand) any {
				return struct{ ID uuid.UUID }{c.ID}
			}))},
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
	return keyed(s, op, placeOrderIn.command, s.app.PlaceOrder().Handle, entity(app.NewOrderData, op.route))
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
		return s.app.GetOrder().Handle(ctx, auth, callerOf(ctx).principal, id, seen)
	}, app.NewOrderData)
}

func (s *Server) listOrders(operation) http.Handler {
	return listPage(s, func(ctx context.Context, auth *app.AuthCheck, page app.Page) ([]*domain.Order, error) {
		return s.app.ListOrders().Handle(ctx, auth, callerOf(ctx).principal, page)
	}, (*domain.Order).ID, app.NewOrderData)
}

// cancelOrder and shipOrder take no body and require If-Match.
func (s *Server) cancelOrder(op operation) http.Handler {
	return keyed(s, op, func(_ noBody, at target) (app.CancelOrderCommand, error) {
		return app.CancelOrderCommand{ID: at.id, Expected: at.expected}, nil
	}, s.app.CancelOrder().Handle, entity(app.NewOrderData, ""))
}

func (s *Server) shipOrder(op operation) http.Handler {
	return keyed(s, op, func(_ noBody, at target) (app.ShipOrderCommand, error) {
		return app.ShipOrderCommand{ID: at.id, Expected: at.expected}, nil
	}, s.app.ShipOrder().Handle, entity(app.NewOrderData, ""))
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
	return keyed(s, op, paymentIn.command, s.app.RecordPayment().Handle, func(p app.PaymentRecorded) (any, map[string]string) {
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
	return keyed(s, op, refundIn.command, s.app.RecordRefund().Handle, func(f app.RefundRecorded) (any, map[string]string) {
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
	}, s.app.DeactivateActor().Handle, func(a domain.Actor) (any, map[string]string) {
		return actorJSON{ID: a.ID, Name: a.Name, Role: a.Role.String(), Active: a.Active,
			CreditLimitCents: int64(a.CreditLimitCents), CreatedAt: a.CreatedAt.UTC()}, nil
	})
}

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

func renderOrder(status int, withLocation bool) func(*domain.Order) (app.Receipt, error) {
	return func(o *domain.Order) (app.Receipt, error) {
		h := map[string]string{"ETag": etag(o.Version())}
		if withLocation {
			h["Location"] = "/v1/orders/" + o.ID().String()
		}
		return receipt(status, toOrderJSON(o), h)
	}
}

type placeOrderIn struct {
	Lines *[]orderLineIn `json:"lines"`
}

type orderLineIn struct {
	ProductID *string `json:"product_id"`
	Quantity  *int64  `json:"quantity"`
}

func (s *Server) placeOrder(w http.ResponseWriter, r *http.Request) error {
	pr := principal(r)
	if err := keyPresent(r); err != nil {
		return err
	}
	var in placeOrderIn
	if err := decode(w, r, &in, false); err != nil {
		return err
	}
	var v domain.Validation
	required(&v, "lines", in.Lines)
	if err := v.Err(); err != nil {
		return err
	}
	ids := make([]string, len(*in.Lines))
	qty := make([]int64, len(*in.Lines))
	for i, l := range *in.Lines {
		if l.ProductID == nil {
			v.Add("lines["+strconv.Itoa(i)+"].product_id", "is required")
		} else {
			ids[i] = *l.ProductID
		}
		if l.Quantity == nil {
			v.Add("lines["+strconv.Itoa(i)+"].quantity", "is required")
		} else {
			qty[i] = *l.Quantity
		}
	}
	if err := v.Err(); err != nil {
		return err
	}
	lines, err := domain.ParseLineRequests(ids, qty)
	if err != nil {
		return err
	}
	cmd := app.PlaceOrderCommand{Lines: lines}
	key, err := s.idempotencyKey(r, pr, "placeOrder", keyRequired, cmd)
	if err != nil {
		return err
	}
	out, err := s.app.PlaceOrder.Handle(r.Context(), cmd, app.Call[*domain.Order]{Principal: pr, Key: key, Render: renderOrder(http.StatusCreated, true)})
	return s.respond(w, "placeOrder", out, err)
}

func (s *Server) getOrder(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	o, err := s.app.GetOrder.Handle(r.Context(), principal(r), id, seenVersion(r.Header.Values("If-None-Match")))
	if err != nil {
		return err
	}
	if notModified(w, r, o.Version()) {
		return nil
	}
	return writeJSON(w, http.StatusOK, toOrderJSON(o))
}

func (s *Server) listOrders(w http.ResponseWriter, r *http.Request) error {
	page, err := pageOf(r)
	if err != nil {
		return err
	}
	want := page.Limit
	page.Limit++
	os, err := s.app.ListOrders.Handle(r.Context(), principal(r), page)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, newList(os, want, (*domain.Order).ID, toOrderJSON))
}

func (s *Server) cancelOrder(w http.ResponseWriter, r *http.Request) error {
	return transition(s, w, r, "cancelOrder", s.app.CancelOrder.Handle,
		func(id uuid.UUID, expected []domain.Version) app.CancelOrderCommand {
			return app.CancelOrderCommand{ID: id, Expected: expected}
		})
}

func (s *Server) shipOrder(w http.ResponseWriter, r *http.Request) error {
	return transition(s, w, r, "shipOrder", s.app.ShipOrder.Handle,
		func(id uuid.UUID, expected []domain.Version) app.ShipOrderCommand {
			return app.ShipOrderCommand{ID: id, Expected: expected}
		})
}

// transition serves cancel and ship: no body, If-Match required, key accepted
// and checked before the precondition.
func transition[C any](s *Server, w http.ResponseWriter, r *http.Request, operation string,
	handle func(context.Context, C, app.Call[*domain.Order]) (app.Outcome, error),
	command func(id uuid.UUID, expected []domain.Version) C,
) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var in struct{}
	if err := decode(w, r, &in, true); err != nil {
		return err
	}
	pr := principal(r)
	pre := parseIfMatch(r.Header.Values("If-Match"))
	cmd := command(id, pre.versions)
	key, err := s.idempotencyKey(r, pr, operation, keyAccepted, cmd)
	if err != nil {
		return err
	}
	if err := pre.err(); err != nil {
		return err
	}
	out, err := handle(r.Context(), cmd, app.Call[*domain.Order]{Principal: pr, Key: key, Render: renderOrder(http.StatusOK, false)})
	return s.respond(w, operation, out, err)
}

type paymentIn struct {
	AmountCents *int64 `json:"amount_cents"`
}

type paymentJSON struct {
	OrderID     uuid.UUID `json:"order_id"`
	AmountCents int64     `json:"amount_cents"`
	PaidCents   int64     `json:"paid_cents"`
}

func (s *Server) recordPayment(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	pr := principal(r)
	if err := keyPresent(r); err != nil {
		return err
	}
	var in paymentIn
	if err := decode(w, r, &in, false); err != nil {
		return err
	}
	var v domain.Validation
	required(&v, "amount_cents", in.AmountCents)
	if err := v.Err(); err != nil {
		return err
	}
	amount, err := domain.ParsePayment(*in.AmountCents)
	if err != nil {
		return err
	}
	cmd := app.RecordPaymentCommand{OrderID: id, Amount: amount}
	key, err := s.idempotencyKey(r, pr, "recordPayment", keyRequired, cmd)
	if err != nil {
		return err
	}
	out, err := s.app.RecordPayment.Handle(r.Context(), cmd, app.Call[app.PaymentRecorded]{Principal: pr, Key: key,
		Render: func(p app.PaymentRecorded) (app.Receipt, error) {
			return receipt(http.StatusCreated, paymentJSON{OrderID: p.OrderID, AmountCents: int64(p.Amount), PaidCents: int64(p.Paid)}, nil)
		}})
	return s.respond(w, "recordPayment", out, err)
}

type refundIn struct {
	AmountCents *int64  `json:"amount_cents"`
	Reason      *string `json:"reason"`
}

type refundJSON struct {
	OrderID       uuid.UUID `json:"order_id"`
	AmountCents   int64     `json:"amount_cents"`
	RefundedCents int64     `json:"refunded_cents"`
}

func (s *Server) recordRefund(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	pr := principal(r)
	if err := keyPresent(r); err != nil {
		return err
	}
	var in refundIn
	if err := decode(w, r, &in, false); err != nil {
		return err
	}
	var v domain.Validation
	required(&v, "amount_cents", in.AmountCents)
	required(&v, "reason", in.Reason)
	if err := v.Err(); err != nil {
		return err
	}
	refund, err := domain.ParseRefund(*in.AmountCents, *in.Reason)
	if err != nil {
		return err
	}
	cmd := app.RecordRefundCommand{OrderID: id, Refund: refund}
	key, err := s.idempotencyKey(r, pr, "recordRefund", keyRequired, cmd)
	if err != nil {
		return err
	}
	out, err := s.app.RecordRefund.Handle(r.Context(), cmd, app.Call[app.RefundRecorded]{Principal: pr, Key: key,
		Render: func(f app.RefundRecorded) (app.Receipt, error) {
			return receipt(http.StatusCreated, refundJSON{OrderID: f.OrderID, AmountCents: int64(f.Amount), RefundedCents: int64(f.Refunded)}, nil)
		}})
	return s.respond(w, "recordRefund", out, err)
}

type actorJSON struct {
	ID               uuid.UUID `json:"id"`
	Name             string    `json:"name"`
	Role             string    `json:"role"`
	Active           bool      `json:"active"`
	CreditLimitCents int64     `json:"credit_limit_cents"`
	CreatedAt        time.Time `json:"created_at"`
}

func (s *Server) deactivateActor(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var in struct{}
	if err := decode(w, r, &in, true); err != nil {
		return err
	}
	pr := principal(r)
	cmd := app.DeactivateActorCommand{ID: id}
	key, err := s.idempotencyKey(r, pr, "deactivateActor", keyAccepted, cmd)
	if err != nil {
		return err
	}
	out, err := s.app.DeactivateActor.Handle(r.Context(), cmd, app.Call[domain.Actor]{Principal: pr, Key: key,
		Render: func(a domain.Actor) (app.Receipt, error) {
			return receipt(http.StatusOK, actorJSON{ID: a.ID, Name: a.Name, Role: a.Role.String(), Active: a.Active,
				CreditLimitCents: int64(a.CreditLimitCents), CreatedAt: a.CreatedAt.UTC()}, nil)
		}})
	return s.respond(w, "deactivateActor", out, err)
}

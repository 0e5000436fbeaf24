package httpapi

import (
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
	ID         uuid.UUID       `json:"id"`
	CustomerID uuid.UUID       `json:"customer_id"`
	Status     string          `json:"status"`
	Lines      []orderLineJSON `json:"lines"`
	TotalCents int64           `json:"total_cents"`
	PaidCents  int64           `json:"paid_cents"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
}

func toOrderJSON(o *domain.Order) orderJSON {
	lines := make([]orderLineJSON, len(o.Lines()))
	for i, l := range o.Lines() {
		lines[i] = orderLineJSON{ProductID: l.ProductID, Quantity: int32(l.Quantity), UnitPriceCents: int64(l.UnitPrice)}
	}
	return orderJSON{
		ID: o.ID(), CustomerID: o.CustomerID(), Status: o.Status().String(), Lines: lines,
		TotalCents: int64(o.Total()), PaidCents: int64(o.Paid()),
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

func (s *Server) placeOrder(w http.ResponseWriter, r *http.Request) {
	pr := principal(r)
	if !s.keyPresent(w, r) {
		return
	}
	var in placeOrderIn
	if p := decode(w, r, &in, false); p != nil {
		s.writeProblem(w, r, p)
		return
	}
	var v domain.Validation
	required(&v, "lines", in.Lines)
	if err := v.Err(); err != nil {
		s.writeError(w, r, err)
		return
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
		s.writeError(w, r, err)
		return
	}
	lines, err := domain.ParseLineRequests(ids, qty)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	cmd := app.PlaceOrderCommand{Lines: lines}
	var key *app.Key
	var prob *Problem
	if s.benchNoKeys {
		// BENCHMARK ONLY (BENCH_DISABLE_IDEMPOTENCY): validate the header as
		// the contract says, then place the order without a key record.
		if _, _, ok := parseKey(r.Header.Values("Idempotency-Key")); !ok {
			prob = problem(codeKeyInvalid, "Idempotency-Key must be 1 to 255 printable ASCII characters, bare or as a quoted string")
		}
	} else {
		key, prob = idempotencyKey(r, pr, "placeOrder", keyRequired, cmd)
	}
	if prob != nil {
		s.writeProblem(w, r, prob)
		return
	}
	out, err := s.PlaceOrder.Handle(r.Context(), cmd, app.Call[*domain.Order]{Principal: pr, Key: key, Render: renderOrder(http.StatusCreated, true)})
	s.respond(w, r, "placeOrder", out, err)
}

func (s *Server) getOrder(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathID(w, r)
	if !ok {
		return
	}
	o, err := s.Orders.Get(r.Context(), principal(r), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if notModified(w, r, o.Version()) {
		return
	}
	s.writeJSON(w, r, http.StatusOK, toOrderJSON(o))
}

func (s *Server) listOrders(w http.ResponseWriter, r *http.Request) {
	page, ok := s.page(w, r)
	if !ok {
		return
	}
	want := page.Limit
	page.Limit++
	os, err := s.Orders.List(r.Context(), principal(r), page)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, newList(os, want, (*domain.Order).ID, toOrderJSON))
}

func (s *Server) cancelOrder(w http.ResponseWriter, r *http.Request) {
	s.transition(w, r, app.Cancel, "cancelOrder")
}

func (s *Server) shipOrder(w http.ResponseWriter, r *http.Request) {
	s.transition(w, r, app.Ship, "shipOrder")
}

// transition serves cancel and ship: no body, If-Match required, key accepted
// and checked before the precondition.
func (s *Server) transition(w http.ResponseWriter, r *http.Request, move app.Transition, operation string) {
	id, ok := s.pathID(w, r)
	if !ok {
		return
	}
	var in struct{}
	if p := decode(w, r, &in, true); p != nil {
		s.writeProblem(w, r, p)
		return
	}
	pr := principal(r)
	pre := parseIfMatch(r.Header.Values("If-Match"))
	cmd := app.TransitionOrderCommand{ID: id, Move: move, Expected: pre.versions}
	key, prob := idempotencyKey(r, pr, operation, keyAccepted, cmd)
	if prob != nil {
		s.writeProblem(w, r, prob)
		return
	}
	if prob := pre.problem(); prob != nil {
		s.writeProblem(w, r, prob)
		return
	}
	out, err := s.TransitionOrder.Handle(r.Context(), cmd, app.Call[*domain.Order]{Principal: pr, Key: key, Render: renderOrder(http.StatusOK, false)})
	s.respond(w, r, operation, out, err)
}

type paymentIn struct {
	AmountCents *int64 `json:"amount_cents"`
}

type paymentJSON struct {
	OrderID     uuid.UUID `json:"order_id"`
	AmountCents int64     `json:"amount_cents"`
	PaidCents   int64     `json:"paid_cents"`
}

func (s *Server) recordPayment(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathID(w, r)
	if !ok {
		return
	}
	pr := principal(r)
	if !s.keyPresent(w, r) {
		return
	}
	var in paymentIn
	if p := decode(w, r, &in, false); p != nil {
		s.writeProblem(w, r, p)
		return
	}
	var v domain.Validation
	required(&v, "amount_cents", in.AmountCents)
	if err := v.Err(); err != nil {
		s.writeError(w, r, err)
		return
	}
	amount, err := domain.ParsePayment(*in.AmountCents)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	cmd := app.RecordPaymentCommand{OrderID: id, Amount: amount}
	key, prob := idempotencyKey(r, pr, "recordPayment", keyRequired, cmd)
	if prob != nil {
		s.writeProblem(w, r, prob)
		return
	}
	out, err := s.RecordPayment.Handle(r.Context(), cmd, app.Call[app.PaymentRecorded]{Principal: pr, Key: key,
		Render: func(p app.PaymentRecorded) (app.Receipt, error) {
			return receipt(http.StatusCreated, paymentJSON{OrderID: p.OrderID, AmountCents: int64(p.Amount), PaidCents: int64(p.Paid)}, nil)
		}})
	s.respond(w, r, "recordPayment", out, err)
}

type actorJSON struct {
	ID               uuid.UUID `json:"id"`
	Name             string    `json:"name"`
	Role             string    `json:"role"`
	Active           bool      `json:"active"`
	CreditLimitCents int64     `json:"credit_limit_cents"`
	CreatedAt        time.Time `json:"created_at"`
}

func (s *Server) deactivateActor(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathID(w, r)
	if !ok {
		return
	}
	var in struct{}
	if p := decode(w, r, &in, true); p != nil {
		s.writeProblem(w, r, p)
		return
	}
	pr := principal(r)
	cmd := app.DeactivateActorCommand{ID: id}
	key, prob := idempotencyKey(r, pr, "deactivateActor", keyAccepted, cmd)
	if prob != nil {
		s.writeProblem(w, r, prob)
		return
	}
	out, err := s.DeactivateActor.Handle(r.Context(), cmd, app.Call[domain.Actor]{Principal: pr, Key: key,
		Render: func(a domain.Actor) (app.Receipt, error) {
			return receipt(http.StatusOK, actorJSON{ID: a.ID, Name: a.Name, Role: a.Role.String(), Active: a.Active,
				CreditLimitCents: int64(a.CreditLimitCents), CreatedAt: a.CreatedAt.UTC()}, nil)
		}})
	s.respond(w, r, "deactivateActor", out, err)
}

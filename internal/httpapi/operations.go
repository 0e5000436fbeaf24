package httpapi

import (
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
)

// operation is one operation of the API, declared once (ADR 0026): routing
// (routes.go), the keyed prologue (keyed.go), replay and the metrics read
// it, and TestOperationsMatchTheDocument checks it against openapi.yaml.
type operation struct {
	// name is the operation's operationId in openapi.yaml and the scope of
	// its idempotency keys: never renamed once deployed (a stored key
	// would be orphaned and its retry run twice), never shared.
	name   string
	method string
	// route is the chi pattern in full, as the metrics label it.
	route  string
	status int // the success status
	key    keyRule
	// ifMatch: a write that needs If-Match (428 without it).
	ifMatch bool
	// access refuses the callers whose role may not call the operation
	// (403), before the key, If-Match or the body are looked at; nil: any
	// authenticated caller (on /v1) or anyone (outside it).
	access func(app.Principal) error
	// forms are a keyed operation's canonical fingerprint forms: the
	// current one, then the previous one while it is still accepted
	// (fingerprint.go). Never edited in place once deployed.
	forms []fingerprintForm
	// serve builds the operation's handler on a server; nil when that
	// server does not serve it (GET /metrics with METRICS_ADDR).
	serve func(*Server, operation) http.Handler
}

// operations is the API surface: every operation of openapi.yaml, and
// nothing else but the API page's assets (routes.go).
var operations = []operation{
	{name: "healthz", method: "GET", route: "/healthz", status: 200, serve: plain((*Server).healthz)},
	{name: "livez", method: "GET", route: "/livez", status: 200, serve: plain((*Server).healthz)},
	{name: "readyz", method: "GET", route: "/readyz", status: 200, serve: plain((*Server).readyz)},
	{name: "metrics", method: "GET", route: "/metrics", status: 200, serve: (*Server).metricsRoute},
	{name: "openapi", method: "GET", route: "/openapi.yaml", status: 200, serve: plain((*Server).openapi)},
	{name: "docs", method: "GET", route: "/docs", status: 200, serve: plain((*Server).docs)},

	{name: "createProduct", method: "POST", route: "/v1/products", status: 201, key: keyAccepted, access: app.StaffOnly,
		serve: (*Server).createProduct, forms: forms(formOf(1, func(c app.CreateProductCommand) canonical {
			return canonical{"sku": c.SKU, "name": c.Name, "price_cents": c.PriceCents, "stock": c.Stock}
		}), legacyForm("POST", "/v1/products", nil, func(c app.CreateProductCommand) any {
			return struct {
				SKU        string
				Name       string
				PriceCents int64
				Stock      int64
			}{c.SKU, c.Name, c.PriceCents, c.Stock}
		}))},
	{name: "listProducts", method: "GET", route: "/v1/products", status: 200, serve: (*Server).listProducts},
	{name: "getProduct", method: "GET", route: "/v1/products/{id}", status: 200, serve: (*Server).getProduct},
	{name: "updateProduct", method: "PATCH", route: "/v1/products/{id}", status: 200, key: keyAccepted, ifMatch: true, access: app.StaffOnly,
		serve: (*Server).updateProduct, forms: forms(formOf(1, func(c app.UpdateProductCommand) canonical {
			return canonical{"product_id": id(c.ID), "if_match": versionSet(c.Expected), "name": c.Name, "price_cents": c.PriceCents}
		}), legacyForm("PATCH", "/v1/products/{id}", func(c app.UpdateProductCommand) uuid.UUID { return c.ID }, func(c app.UpdateProductCommand) any {
			return struct {
				ID         uuid.UUID
				Expected   []int64
				Name       *string
				PriceCents *int64
			}{c.ID, versionList(c.Expected), c.Name, c.PriceCents}
		}))},
	{name: "getStock", method: "GET", route: "/v1/products/{id}/stock", status: 200, serve: (*Server).getStock},
	{name: "adjustStock", method: "POST", route: "/v1/products/{id}/stock-adjustments", status: 201, key: keyRequired, access: app.StaffOnly,
		serve: (*Server).adjustStock, forms: forms(formOf(1, func(c app.AdjustStockCommand) canonical {
			return canonical{"product_id": id(c.ProductID), "delta": c.Delta, "reason": c.Reason}
		}), legacyForm("POST", "/v1/products/{id}/stock-adjustments", func(c app.AdjustStockCommand) uuid.UUID { return c.ProductID }, func(c app.AdjustStockCommand) any {
			return struct {
				ProductID uuid.UUID
				Delta     int64
				Reason    string
			}{c.ProductID, c.Delta, c.Reason}
		}))},
	{name: "listStock", method: "GET", route: "/v1/stock", status: 200, serve: (*Server).listStock},

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

	{name: "deactivateActor", method: "POST", route: "/v1/actors/{id}/deactivate", status: 200, key: keyAccepted, access: app.StaffOnly,
		serve: (*Server).deactivateActor, forms: forms(formOf(1, func(c app.DeactivateActorCommand) canonical {
			return canonical{"actor_id": id(c.ID)}
		}), legacyForm("POST", "/v1/actors/{id}/deactivate", func(c app.DeactivateActorCommand) uuid.UUID { return c.ID }, func(c app.DeactivateActorCommand) any {
			return struct{ ID uuid.UUID }{c.ID}
		}))},
}

// What the rest of the package reads from the table: the keyed operations
// (their replay metric series exist from the start), their fingerprint
// forms by name (Server.forms), and the routes that take If-Match (their
// version-conflict series).
var (
	keyedOperations  = collect(func(op operation) (string, bool) { return op.name, op.key != keyNone })
	fingerprintForms = formsByName()
	ifMatchRoutes    = collect(func(op operation) (string, bool) { return op.route, op.ifMatch })
)

// collect lists what of picks from the operations it says yes to.
func collect(of func(operation) (string, bool)) []string {
	var out []string
	for _, op := range operations {
		if v, yes := of(op); yes {
			out = append(out, v)
		}
	}
	return out
}

func formsByName() map[string][]fingerprintForm {
	out := make(map[string][]fingerprintForm)
	for _, op := range operations {
		if len(op.forms) > 0 {
			out[op.name] = op.forms
		}
	}
	return out
}

// forms lists an operation's fingerprint forms, the current one first.
func forms(current fingerprintForm, previous ...fingerprintForm) []fingerprintForm {
	return append([]fingerprintForm{current}, previous...)
}

// inV1 says whether the operation is under /v1, where callers authenticate,
// and gives its pattern within the /v1 router.
func (op operation) inV1() (pattern string, ok bool) {
	pattern, ok = strings.CutPrefix(op.route, "/v1/")
	return "/" + pattern, ok
}

// plain serves an operation outside /v1 with a net/http handler method.
func plain(h func(*Server, http.ResponseWriter, *http.Request)) func(*Server, operation) http.Handler {
	return func(s *Server, _ operation) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(s, w, r) })
	}
}

package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// handler is what every API handler is: it writes its response and returns
// nil, or writes nothing and returns an error.
type handler func(w http.ResponseWriter, r *http.Request) error

// handle adapts a handler to net/http. It is the one place where an error a
// handler returns becomes a response: writeError classifies it once, maps
// its domain.Code to its status, logs internals and sends none.
func (s *Server) handle(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	}
}

// routes lists the whole API surface in one place.
func (s *Server) routes() chi.Router {
	r := chi.NewRouter()
	if s.tracing != nil {
		r.Use(s.traced())
	}
	r.Use(withRequestID, s.observe)
	// HEAD on every GET route (RFC 9110 §9.3.2): the GET handler runs and
	// net/http sends its headers without the body.
	r.Use(middleware.GetHead)
	r.NotFound(s.handle(func(http.ResponseWriter, *http.Request) error { return errNoSuchResource }))
	r.MethodNotAllowed(s.handle(func(_ http.ResponseWriter, r *http.Request) error {
		return domain.Errorf(domain.CodeMethodNotAllowed, "method %s is not allowed here", r.Method)
	}))

	r.Get("/healthz", s.healthz)
	r.Get("/livez", s.healthz)
	r.Get("/readyz", s.readyz)
	if s.metricsHere {
		r.Method(http.MethodGet, "/metrics", s.Metrics())
	}
	r.Get("/openapi.yaml", s.openapi)
	r.Get("/docs", s.docs)
	r.Get("/docs/{asset}", s.handle(s.docsAsset))

	r.Route("/v1", func(r chi.Router) {
		r.Use(s.admitted, s.withDeadline, s.authenticate)

		r.Post("/products", s.handle(s.createProduct))
		r.Get("/products", s.handle(s.listProducts))
		r.Get("/products/{id}", s.handle(s.getProduct))
		r.Patch("/products/{id}", s.handle(s.updateProduct))
		r.Get("/products/{id}/stock", s.handle(s.getStock))
		r.Post("/products/{id}/stock-adjustments", s.handle(s.adjustStock))
		r.Get("/stock", s.handle(s.listStock))

		r.Post("/orders", s.handle(s.placeOrder))
		r.Get("/orders", s.handle(s.listOrders))
		r.Get("/orders/{id}", s.handle(s.getOrder))
		r.Post("/orders/{id}/cancel", s.handle(s.cancelOrder))
		r.Post("/orders/{id}/ship", s.handle(s.shipOrder))
		r.Post("/orders/{id}/payments", s.handle(s.recordPayment))
		r.Post("/orders/{id}/refunds", s.handle(s.recordRefund))

		r.Post("/actors/{id}/deactivate", s.handle(s.deactivateActor))
	})
	return r
}

package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"
)

// routes lists the whole API surface in one place.
func (s *Server) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(withRequestID, s.observe)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.writeProblem(w, r, problem("not_found", "no such resource"))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		s.writeProblem(w, r, problem(codeMethodNotAllowed, "method "+r.Method+" is not allowed here"))
	})

	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Method(http.MethodGet, "/metrics", s.metricsHandler())
	r.Get("/openapi.yaml", s.openapi)

	r.Route("/v1", func(r chi.Router) {
		r.Use(s.authenticate)

		r.Post("/products", s.createProduct)
		r.Get("/products", s.listProducts)
		r.Get("/products/{id}", s.getProduct)
		r.Patch("/products/{id}", s.updateProduct)
		r.Get("/products/{id}/stock", s.getStock)
		r.Post("/products/{id}/stock-adjustments", s.adjustStock)
		r.Get("/stock", s.listStock)

		r.Post("/orders", s.placeOrder)
		r.Get("/orders", s.listOrders)
		r.Get("/orders/{id}", s.getOrder)
		r.Post("/orders/{id}/cancel", s.cancelOrder)
		r.Post("/orders/{id}/ship", s.shipOrder)
		r.Post("/orders/{id}/payments", s.recordPayment)

		r.Post("/actors/{id}/deactivate", s.deactivateActor)
	})
	return r
}

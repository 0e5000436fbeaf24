package httpapi

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/ordersvc/ordersvc/internal/app"
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

// routes mounts every operation of the table (operations.go), outside /v1
// or in it, behind the middleware of each.
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
	r.MethodNotAllowed(s.handle(func(w http.ResponseWriter, req *http.Request) error {
		w.Header().Set("Allow", strings.Join(allowedMethods(r, req.URL.Path), ", ")) // RFC 9110 §15.5.6
		return domain.Errorf(domain.CodeMethodNotAllowed, "method %s is not allowed here", req.Method)
	}))
	// The API page's assets, the one route that is no operation of the
	// document.
	r.Get("/docs/{asset}", s.handle(s.docsAsset))

	v1 := chi.NewRouter()
	v1.Use(s.admitted, s.withDeadline, s.authenticate)
	for _, op := range operations {
		h := op.serve(s, op)
		if h == nil {
			continue
		}
		if op.access != nil {
			h = s.only(op.access)(h)
		}
		if pattern, ok := op.inV1(); ok {
			v1.Method(op.method, pattern, h)
		} else {
			r.Method(op.method, op.route, h)
		}
	}
	r.Mount("/v1", v1)
	return r
}

// only refuses a caller whose role may not call the operation (403
// forbidden) before its handler reads anything: a customer is not told to
// add an Idempotency-Key or an If-Match only to be refused afterwards.
func (s *Server) only(rule func(app.Principal) error) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return s.handle(func(w http.ResponseWriter, r *http.Request) error {
			if err := rule(principal(r)); err != nil {
				return err
			}
			next.ServeHTTP(w, r)
			return nil
		})
	}
}

// allowedMethods lists the methods router serves at path, for the Allow
// header of a 405; HEAD wherever GET is (middleware.GetHead).
func allowedMethods(router *chi.Mux, path string) []string {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if router.Match(chi.NewRouteContext(), m, path) {
			allowed = append(allowed, m)
			if m == http.MethodGet {
				allowed = append(allowed, http.MethodHead)
			}
		}
	}
	return allowed
}

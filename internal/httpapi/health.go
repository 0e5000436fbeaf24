package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// healthOperations are the probes (ADR 0026: each file declares its own
// operations; operations.go joins them).
func healthOperations() []operation {
	return []operation{
		{name: "healthz", method: "GET", route: "/healthz", status: 200, serve: plain((*Server).healthz)},
		{name: "livez", method: "GET", route: "/livez", status: 200, serve: plain((*Server).healthz)},
		{name: "readyz", method: "GET", route: "/readyz", status: 200, serve: plain((*Server).readyz)},
	}
}

// healthz answers /healthz and /livez (the name Kubernetes' own endpoints
// use): the process is up and serving. It never touches the database, so a
// database outage does not make an orchestrator restart every replica.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// ErrShuttingDown is what Deps.Ready returns once the process has been told
// to stop: /readyz then answers 503 so that load balancers stop sending
// requests, while the other endpoints are still served.
var ErrShuttingDown = errors.New("shutting down")

// ErrSchemaBehind is what Deps.Ready and Deps.Admit return while the
// database lacks a migration this release needs: /readyz and every /v1
// request answer 503 with Retry-After until `api migrate up` has run.
var ErrSchemaBehind = errors.New("the database schema is older than this release needs")

// schemaBehindRetry is the Retry-After of a request refused for the schema:
// a migration takes seconds, not the one second of a lock wait.
const schemaBehindRetry = "5"

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		if errors.Is(err, ErrShuttingDown) {
			s.writeProblem(w, r, problem(domain.CodeUnavailable, "the service is shutting down"))
			return
		}
		if errors.Is(err, ErrSchemaBehind) {
			w.Header().Set("Retry-After", schemaBehindRetry)
			s.writeProblem(w, r, problem(domain.CodeUnavailable, "the database schema is older than this release needs; waiting for its migration"))
			return
		}
		s.log.WarnContext(r.Context(), "not ready", "err", err)
		s.writeProblem(w, r, problem(domain.CodeUnavailable, "the database does not answer"))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// admitted refuses every /v1 request while Deps.Admit says the schema is
// behind, with 503 and Retry-After: a client retries, nothing reads a table
// or column that is not there yet.
func (s *Server) admitted(next http.Handler) http.Handler {
	if s.admit == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.admit(); err != nil {
			w.Header().Set("Retry-After", schemaBehindRetry)
			s.writeProblem(w, r, problem(domain.CodeUnavailable, "the database schema is older than this release needs; retry later"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

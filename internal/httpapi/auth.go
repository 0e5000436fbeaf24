package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

// authenticate requires a valid bearer token on every /v1 route.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		token = strings.TrimSpace(token)
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			s.writeError(w, r, app.ErrUnauthenticated)
			return
		}
		p, check, err := s.app.Authenticate.Handle(r.Context(), token)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), principalKey, caller{principal: p, auth: check}))
		g := &authGate{ResponseWriter: w, s: s, r: r, auth: check}
		defer g.recoverPanic()
		next.ServeHTTP(g, r)
		g.decide() // a handler that wrote nothing still answers only after the check
	})
}

// recoverPanic answers a handler's panic from inside the gate: the 500
// goes through the gate like any answer, so a refused token check still
// answers 401 (observe's recovery, outside the gate, would send the 500
// before the check was settled). A panic after the handler began its
// response ends that response as observe would.
func (g *authGate) recoverPanic() {
	rec := recover()
	if rec == nil {
		return
	}
	if rec == http.ErrAbortHandler || g.wrote {
		panic(rec)
	}
	g.s.log.ErrorContext(g.r.Context(), "panic serving request", "panic", rec)
	g.s.writeProblem(g, g.r, problem(domain.CodeInternal, "an internal error occurred"))
}

// FAST PATH (docs/fast-path.md #6): a request that sent no statement
// confirms its token check before it answers.
//
// authGate holds a response back until the request's token check is
// settled (app.AuthCheck). The check normally rides in front of the
// request's first statement; a request that answers without sending one (a
// validation error, a malformed id) confirms the token with a lookup of its
// own before anything is written. A refused check answers 401 instead of
// what the handler meant to send, and a check the database could not settle
// answers 503: never is a response sent on the cache's word alone. A check
// that passed becomes pending again when the request waits (a key, a retry),
// so an answer after a wait is held back the same way.
type authGate struct {
	http.ResponseWriter
	s       *Server
	r       *http.Request
	auth    *app.AuthCheck
	decided bool
	refused bool
	wrote   bool // the handler began its response
}

func (g *authGate) decide() {
	if g.decided {
		return
	}
	g.decided = true
	err := g.s.app.Authenticate.Confirm(g.r.Context(), g.auth)
	if err == nil {
		return
	}
	g.refused = true
	h := g.ResponseWriter.Header()
	for k := range h {
		if k != "X-Request-Id" {
			delete(h, k)
		}
	}
	g.s.writeError(g.ResponseWriter, g.r, err)
}

func (g *authGate) WriteHeader(code int) {
	g.wrote = true
	g.decide()
	if !g.refused {
		g.ResponseWriter.WriteHeader(code)
	}
}

func (g *authGate) Write(b []byte) (int, error) {
	g.wrote = true
	g.decide()
	if g.refused {
		return len(b), nil
	}
	return g.ResponseWriter.Write(b)
}

func (g *authGate) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// caller is a request's authenticated caller (authenticate): who calls, and
// the request's token check, which the handlers pass on to the use cases
// as a value (app.Call's Auth, a query's auth argument). The use cases and
// the repositories' connection get it from there, never from a context.
type caller struct {
	principal app.Principal
	auth      *app.AuthCheck
}

// callerOf is the caller of the request whose context ctx is.
func callerOf(ctx context.Context) caller {
	c, _ := ctx.Value(principalKey).(caller)
	return c
}

// principal is who calls request r.
func principal(r *http.Request) app.Principal { return callerOf(r.Context()).principal }

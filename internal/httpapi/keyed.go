package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

// target is what a keyed request names besides its body: the {id} of its
// route and the versions its If-Match lists (for an operation that takes
// it; the If-Match refusals come after the key, see keyed).
type target struct {
	id       uuid.UUID
	expected []domain.Version
}

// noBody is the input of an operation that takes none: an empty body, or
// an empty JSON object.
type noBody struct{}

// useCase is a command's Handle (internal/app).
type useCase[C, T any] func(context.Context, C, app.Call[T]) (app.Outcome, error)

// render gives a command's result as a response body with its replayable
// headers (ETag, Location).
type render[T any] func(T) (body any, header map[string]string)

// keyed serves a keyed operation: the prologue every command shares, in
// its one order, then the use case and the response. What differs from one
// operation to the next is its declaration (its entry in its resource
// file's list of operations, joined in operations.go), its input type In
// with the command it maps to (command), its use case and its render.
//
// The order is part of the contract: the role was checked before (403,
// routes.go); then the {id} (404), a required key's presence (400, before
// the body is read), the body (413, 400, 422 from command), the key itself
// (400) and its fingerprint, and only then If-Match (428, 400, 409), so that
// a retried write whose first response was lost replays instead of being
// refused for the version it changed. An If-Match that is missing or
// unreadable is refused after the key's record is read, when there is a
// key (app.UseCases.RefuseUnderKey): the key of a completed request
// answers for it (its replay, or 422 for another request under it); a stale
// one is the use case's version_conflict, after its claim.
func keyed[In, C, T any](s *Server, op operation, command func(In, target) (C, error), use useCase[C, T], view render[T]) http.Handler {
	_, empty := any(new(In)).(*noBody)
	hasID := strings.Contains(op.route, "{id}")
	rcpt := receiptOf(op.status, view)
	return s.handle(func(w http.ResponseWriter, r *http.Request) error {
		at, pre, err := op.address(r, hasID)
		if err != nil {
			return err
		}
		var in In
		if err := decode(w, r, &in, empty); err != nil {
			return err
		}
		cmd, err := command(in, at)
		if err != nil {
			return err
		}
		c := callerOf(r.Context())
		key, err := s.idempotencyKey(r, c.principal, op.name, op.key, cmd)
		if err != nil {
			return err
		}
		if err := pre(); err != nil {
			if key == nil {
				return err
			}
			out, err := s.app.RefuseUnderKey(r.Context(), c.principal, c.auth, *key, err)
			return s.respond(w, op.name, out, err)
		}
		out, err := use(r.Context(), cmd, app.Call[T]{Principal: c.principal, Auth: c.auth, Key: key, Render: rcpt})
		return s.respond(w, op.name, out, err)
	})
}

// address reads what a request names before its body: the {id} (a
// malformed one is 404), the presence of a required key, and If-Match,
// whose refusal (pre) is left for after the key.
func (op operation) address(r *http.Request, hasID bool) (at target, pre func() error, err error) {
	pre = func() error { return nil }
	if hasID {
		if at.id, err = pathID(r); err != nil {
			return at, pre, err
		}
	}
	if op.key == keyRequired {
		if err := keyPresent(r); err != nil {
			return at, pre, err
		}
	}
	if op.ifMatch {
		m := parseIfMatch(r.Header.Values("If-Match"))
		at.expected, pre = m.versions, m.err
	}
	return at, pre, nil
}

// receiptOf renders a command's result as the receipt that is sent and,
// with a key, stored for replay.
func receiptOf[T any](status int, view render[T]) func(T) (app.Receipt, error) {
	return func(v T) (app.Receipt, error) {
		body, header := view(v)
		return receipt(status, body, header)
	}
}

// entity renders an aggregate with its ETag; a creation (collection not
// "") also with its Location, collection/<id>.
func entity[E interface {
	ID() uuid.UUID
	Version() domain.Version
}, J any](dto func(E) J, collection string) render[E] {
	return func(e E) (any, map[string]string) {
		h := map[string]string{"ETag": etag(e.Version())}
		if collection != "" {
			h["Location"] = collection + "/" + e.ID().String()
		}
		return dto(e), h
	}
}

// getOne serves a GET of one resource by its {id}: 404 for a malformed id,
// 304 when If-None-Match names its version, else its JSON with its ETag.
func getOne[E interface{ Version() domain.Version }, J any](s *Server, read func(context.Context, *app.AuthCheck, uuid.UUID, app.Seen) (E, error), dto func(E) J) http.Handler {
	return s.handle(func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r)
		if err != nil {
			return err
		}
		e, err := read(r.Context(), callerOf(r.Context()).auth, id, seenVersion(r.Header.Values("If-None-Match")))
		if err != nil {
			return err
		}
		if notModified(w, r, e.Version()) {
			return nil
		}
		return writeJSON(w, http.StatusOK, dto(e))
	})
}

// listPage serves a GET of a list: one page (?limit=, ?cursor=) in the
// page envelope, whose next_cursor comes from one row more than the page.
func listPage[E, J any](s *Server, list func(context.Context, *app.AuthCheck, app.Page) ([]E, error), id func(E) uuid.UUID, dto func(E) J) http.Handler {
	return s.handle(func(w http.ResponseWriter, r *http.Request) error {
		page, err := pageOf(r)
		if err != nil {
			return err
		}
		want := page.Limit
		page.Limit++
		rows, err := list(r.Context(), callerOf(r.Context()).auth, page)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, newList(rows, want, id, dto))
	})
}

// required records a missing required field.
func required[T any](v *domain.Validation, field string, p *T) {
	if p == nil {
		v.Add(field, "is required")
	}
}

package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

// replayableHeaders is the allowlist of response headers stored with an
// idempotency record and replayed (EXT.IDEMPOTENCY.OUTCOME.001). Nothing else
// is kept: no Set-Cookie, no hop-by-hop headers, no credentials.
// Patterns and rule ids: docs/patterns.md.
var replayableHeaders = []string{"Location", "ETag", "Content-Type"}

// receipt renders a JSON response as an app.Receipt: the form in which it is
// both sent and, for keyed requests, stored for replay.
func receipt(status int, body any, header map[string]string) (app.Receipt, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return app.Receipt{}, err
	}
	h := make(map[string]string, len(replayableHeaders))
	h["Content-Type"] = "application/json"
	for _, k := range replayableHeaders {
		if v, ok := header[k]; ok {
			h[k] = v
		}
	}
	return app.Receipt{Status: status, Header: h, Body: b}, nil
}

// respond writes a command's outcome, fresh or replayed, or hands its error
// back to the adapter (routes.go) that renders every error.
func (s *Server) respond(w http.ResponseWriter, operation string, out app.Outcome, err error) error {
	if err != nil {
		return err
	}
	h := w.Header()
	for _, k := range replayableHeaders {
		if v, ok := out.Receipt.Header[k]; ok {
			h.Set(k, v)
		}
	}
	if out.Replayed {
		h.Set("Idempotent-Replayed", "true")
		s.metrics.replays.WithLabelValues(operation).Inc()
	}
	w.WriteHeader(out.Receipt.Status)
	writeBody(w, out.Receipt.Body)
	return nil
}

// writeBody writes a JSON body and ends it with a newline, so that a
// terminal (curl -i) shows the next prompt or status line on a line of its
// own. The newline is added here, when the body is sent, and never stored:
// a replay sends the stored body through here too and matches the original
// byte for byte, records kept from before included; fingerprints are of the
// request, not of this body.
func writeBody(w http.ResponseWriter, b []byte) {
	if len(b) > 0 && b[len(b)-1] != '\n' {
		b = append(b[:len(b):len(b)], '\n')
	}
	_, _ = w.Write(b)
}

// writeJSON writes a query's result.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	writeBody(w, b)
	return nil
}

// errNoSuchResource answers a path that names nothing: an unknown route, a
// malformed id, or an id with no row behind it all get the one detail of
// domain.ErrNotFound.
var errNoSuchResource = domain.ErrNotFound

// pathID reads the {id} parameter. A malformed id names no resource: 404.
func pathID(r *http.Request) (uuid.UUID, error) {
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	if err != nil {
		return uuid.Nil, errNoSuchResource
	}
	return id, nil
}

// notModified answers 304 when If-None-Match matches version v.
func notModified(w http.ResponseWriter, r *http.Request, v domain.Version) bool {
	w.Header().Set("ETag", etag(v))
	if noneMatch(r.Header.Values("If-None-Match"), v) {
		w.WriteHeader(http.StatusNotModified)
		return true
	}
	return false
}

// pageOf reads ?limit= (1 to 100, default 20) and ?cursor=.
func pageOf(r *http.Request) (app.Page, error) {
	p := app.Page{Limit: 20}
	var v domain.Validation
	q := r.URL.Query()
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 100 {
			v.Add("limit", "must be an integer from 1 to 100")
		}
		p.Limit = n
	}
	if c := q.Get("cursor"); c != "" {
		b, err := base64.RawURLEncoding.DecodeString(c)
		if err != nil || len(b) != 16 {
			v.Add("cursor", "is not a cursor returned by this API")
		} else {
			p.Before = uuid.UUID(b)
		}
	}
	return p, v.Err()
}

// list is the page envelope of every list endpoint.
type list[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

// newList builds a page from limit+1 fetched rows: the extra row only says
// that there is a next page.
func newList[E any, T any](rows []E, limit int, id func(E) uuid.UUID, dto func(E) T) list[T] {
	out := list[T]{Items: make([]T, 0, min(len(rows), limit))}
	for i, e := range rows {
		if i == limit {
			last := id(rows[limit-1])
			c := base64.RawURLEncoding.EncodeToString(last[:])
			out.NextCursor = &c
			break
		}
		out.Items = append(out.Items, dto(e))
	}
	return out
}

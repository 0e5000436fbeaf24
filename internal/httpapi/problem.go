package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

// Problem is an RFC 9457 Problem Details body with the extension members
// code (stable, for clients to switch on), request_id and errors.
type Problem struct {
	Type      string       `json:"type"`
	Title     string       `json:"title"`
	Status    int          `json:"status"`
	Detail    string       `json:"detail"`
	Code      domain.Code  `json:"code"`
	Instance  string       `json:"instance,omitempty"`
	RequestID string       `json:"request_id,omitempty"`
	Errors    []fieldError `json:"errors,omitempty"`

	header map[string]string // extra response headers, e.g. Retry-After
}

type fieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// statusOf gives a code its status and title where they are not the
// default. By default a code answers 409 Conflict, titled with its own
// words ("insufficient_stock" is "Insufficient stock"): the request was
// understood and the state of what it acts on refuses it (RFC 9110
// §15.5.10), which is what a rule's code says. So a new rule's code needs no
// row here; a code that answers another status has one, and so does a code
// whose title is not its words. TestEveryCodeHasAStatusAndIsDocumented
// checks that every Code constant that internal/domain declares is in the
// OpenAPI document with the status it answers here, and that no row
// repeats the default.
var statusOf = map[domain.Code]answer{
	domain.CodeMalformed:            {http.StatusBadRequest, "Malformed request"},
	domain.CodeKeyInvalid:           {http.StatusBadRequest, "Invalid idempotency key"},
	domain.CodeKeyRequired:          {http.StatusBadRequest, "Idempotency key required"},
	domain.CodeUnauthenticated:      {http.StatusUnauthorized, "Unauthenticated"},
	domain.CodeForbidden:            {http.StatusForbidden, "Forbidden"},
	domain.CodeNotFound:             {http.StatusNotFound, "Not found"},
	domain.CodeMethodNotAllowed:     {http.StatusMethodNotAllowed, "Method not allowed"},
	domain.CodeSKUTaken:             {http.StatusConflict, "SKU taken"},
	domain.CodeLastStaff:            {http.StatusConflict, "Last staff member"},
	domain.CodeKeyInProgress:        {http.StatusConflict, "Request in progress"},
	domain.CodeTooLarge:             {http.StatusRequestEntityTooLarge, "Payload too large"},
	domain.CodeValidation:           {http.StatusUnprocessableEntity, "Validation failed"},
	domain.CodeKeyReused:            {http.StatusUnprocessableEntity, "Idempotency key reused"},
	domain.CodeCreditLimitExceeded:  {http.StatusUnprocessableEntity, "Credit limit exceeded"},
	domain.CodePreconditionRequired: {http.StatusPreconditionRequired, "Precondition required"},
	domain.CodeInternal:             {http.StatusInternalServerError, "Internal error"},
	domain.CodeUnavailable:          {http.StatusServiceUnavailable, "Service unavailable"},
}

// answer is a code's status and title.
type answer struct {
	status int
	title  string
}

// answerOf is code's row of statusOf, or the default: 409, titled with the
// code's words. A code that is not one (see wellFormed) is internal.
func answerOf(code domain.Code) answer {
	if !wellFormed(code) {
		code = domain.CodeInternal
	}
	if a, ok := statusOf[code]; ok {
		return a
	}
	return defaultAnswer(code)
}

// defaultAnswer is 409, titled with the words of code, a well-formed one.
func defaultAnswer(code domain.Code) answer {
	words := strings.ReplaceAll(string(code), "_", " ")
	return answer{http.StatusConflict, strings.ToUpper(words[:1]) + words[1:]}
}

// wellFormed says whether code is written as every code is: 1 to 64
// characters, a lower-case ASCII letter, then lower-case letters, digits
// and underscores. Anything else (no code at all, or bytes that only a bug
// could have put there) is answered as an internal error, never a guess.
func wellFormed(code domain.Code) bool {
	if len(code) == 0 || len(code) > 64 || code[0] < 'a' || code[0] > 'z' {
		return false
	}
	for _, c := range []byte(code) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// problem builds a Problem for code with a caller-safe detail. An error
// whose code is not well formed is an internal error.
func problem(code domain.Code, detail string) *Problem {
	if !wellFormed(code) {
		code, detail = domain.CodeInternal, "an internal error occurred"
	}
	a := answerOf(code)
	return &Problem{Type: "urn:ordersvc:problem:" + string(code), Title: a.title, Status: a.status, Detail: detail, Code: code}
}

// problemFor classifies err once. Caller-caused errors keep their safe
// detail; anything else becomes a 500 whose body says nothing of the cause.
func problemFor(err error) *Problem {
	var de *domain.Error
	var busy *app.KeyInProgressError
	switch {
	case errors.As(err, &de):
		p := problem(de.Code, de.Detail)
		for _, f := range de.Fields {
			p.Errors = append(p.Errors, fieldError{Field: f.Field, Message: f.Message})
		}
		return p
	case errors.As(err, &busy):
		p := problem(domain.CodeKeyInProgress, "a request with this idempotency key is still in progress; retry later")
		p.header = map[string]string{"Retry-After": strconv.Itoa(max(1, int(busy.RetryAfter.Seconds())))}
		return p
	case errors.Is(err, app.ErrKeyReused):
		return problem(domain.CodeKeyReused, "this idempotency key was used with a different request")
	case errors.Is(err, app.ErrUnavailable):
		p := problem(domain.CodeUnavailable, "the database is unavailable or busy; retry later")
		p.header = map[string]string{"Retry-After": "1"}
		return p
	case errors.Is(err, context.DeadlineExceeded):
		// The request's own deadline (REQUEST_TIMEOUT) ran out, for example
		// while its statement waited in a connection pooler's queue.
		p := problem(domain.CodeUnavailable, "the request did not complete in time; retry later")
		p.header = map[string]string{"Retry-After": "1"}
		return p
	}
	return problem(domain.CodeInternal, "an internal error occurred")
}

// writeError renders err as a problem. Internals are logged once, here, and
// never sent.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		// The caller hung up; nobody reads this answer. 499 is nginx's
		// "client closed request", kept for the access log and metrics.
		s.log.InfoContext(r.Context(), "request cancelled by the client", "err", err)
		w.WriteHeader(statusClientClosed)
		return
	}
	p := problemFor(err)
	switch {
	case p.Status >= 500:
		s.log.ErrorContext(r.Context(), "request failed", "err", err)
	case errors.Is(err, domain.ErrValueRejected):
		s.log.WarnContext(r.Context(), "the database refused a value that the domain accepted", "err", err)
	}
	s.writeProblem(w, r, p)
}

func (s *Server) writeProblem(w http.ResponseWriter, r *http.Request, p *Problem) {
	p.Instance = r.URL.Path
	p.RequestID = requestID(r.Context())
	h := w.Header()
	for k, v := range p.header {
		h.Set(k, v)
	}
	if p.Status == http.StatusServiceUnavailable && h.Get("Retry-After") == "" {
		// Every 503 says when to come back (RFC 9110 §10.2.3); a second is
		// what a pool reconnect or a lock wait usually needs.
		h.Set("Retry-After", "1")
	}
	if p.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="ordersvc"`)
	}
	switch p.Code {
	case domain.CodeVersionConflict:
		s.metrics.versionConflicts.WithLabelValues(routeOf(r)).Inc()
	case domain.CodeKeyReused, domain.CodeKeyInProgress:
		s.metrics.keyConflicts.WithLabelValues(string(p.Code)).Inc()
	}
	body, err := json.Marshal(p)
	if err != nil {
		s.log.ErrorContext(r.Context(), "encode problem", "err", err)
		body = []byte(`{"type":"urn:ordersvc:problem:internal","title":"Internal error","status":500,"detail":"an internal error occurred","code":"internal"}`)
	}
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	writeBody(w, body)
}

// statusClientClosed is logged when the caller went away mid-request.
const statusClientClosed = 499

// logLevelFor keeps expected outcomes out of the error log.
func logLevelFor(status int) slog.Level {
	if status >= 500 {
		return slog.LevelError
	}
	return slog.LevelInfo
}

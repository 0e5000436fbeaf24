package httpapi

import (
	"net/http"
	"slices"
	"strings"

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
// nothing else but the API page's assets (routes.go). Each resource file
// declares its own operations next to their handlers; they are joined here
// in a fixed order: the service's own (health, metrics, docs), then
// products, orders and actors, as in openapi.yaml. A new operation is an
// entry in its resource's list, not an edit of this file.
var operations = slices.Concat(
	healthOperations(),
	metricsOperations(),
	docsOperations(),
	productOperations(),
	orderOperations(),
	actorOperations(),
)

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

package httpapi

import (
	"strings"
	"testing"
)

// TestOperationsTable: each operation is declared once and its declaration
// holds together: a unique name and route, forms exactly when it is keyed
// (one or two: the current one and at most its previous one), If-Match and
// keys only on /v1 writes with an {id} for If-Match, access rules only on
// /v1, and a handler.
func TestOperationsTable(t *testing.T) {
	t.Parallel()
	names, routes := map[string]bool{}, map[string]bool{}
	for _, op := range operations {
		_, inV1 := op.inV1()
		keyed := op.key != keyNone
		switch {
		case names[op.name] || routes[op.method+" "+op.route]:
			t.Errorf("%s (%s %s) is declared twice", op.name, op.method, op.route)
		case keyed != (len(op.forms) > 0) || len(op.forms) > 2:
			t.Errorf("%s: key rule %d with %d fingerprint forms; a keyed operation has one or two, another none", op.name, op.key, len(op.forms))
		case (keyed || op.ifMatch || op.access != nil) && !inV1:
			t.Errorf("%s: a key, If-Match or access rule outside /v1", op.name)
		case op.ifMatch && (!keyed || !strings.Contains(op.route, "{id}")):
			t.Errorf("%s: If-Match on an operation that names no resource or takes no key", op.name)
		case op.serve == nil || op.status < 200 || op.status > 299:
			t.Errorf("%s: no handler, or success status %d", op.name, op.status)
		}
		names[op.name], routes[op.method+" "+op.route] = true, true
	}
}

package httpapi

import (
	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

// MoveFormToNextVersion makes s answer as a later release in which the
// canonical form of operation moved to its next version (other member
// names, so every fingerprint changes). keepPrevious lists the form it
// replaced as earlier, as the release does for one IDEMPOTENCY_TTL;
// without it, s is a release that dropped the previous form.
func MoveFormToNextVersion(s *Server, operation string, keepPrevious bool) {
	forms := make(map[string][]fingerprintForm, len(s.forms))
	for op, fs := range s.forms {
		forms[op] = fs
	}
	cur := s.forms[operation][0]
	next := fingerprintForm{version: cur.version + 1, of: func(command any) (canonical, error) {
		in, err := cur.of(command)
		return canonical{"renamed": in}, err
	}}
	forms[operation] = []fingerprintForm{next}
	if keepPrevious {
		forms[operation] = append(forms[operation], cur)
	}
	s.forms = forms
}

// Operation is an entry of the operations table as the check against the
// OpenAPI document reads it.
type Operation struct {
	Name, Method, Route string
	Status              int
	Key                 string // "required", "optional", or "" for none
	IfMatch             bool
	Restricted          bool // an access rule: only some roles may call it (403)
}

// Operations lists the operations table.
func Operations() []Operation {
	keys := map[keyRule]string{keyNone: "", keyAccepted: "optional", keyRequired: "required"}
	out := make([]Operation, len(operations))
	for i, op := range operations {
		out[i] = Operation{Name: op.name, Method: op.method, Route: op.route, Status: op.status, Key: keys[op.key],
			IfMatch: op.ifMatch, Restricted: op.access != nil}
	}
	return out
}

// Refuses says whether the access rule of the operation named name refuses
// an active caller of role ("customer" or "staff").
func Refuses(name, role string) bool {
	r, err := domain.ParseRole(role)
	if err != nil {
		panic(err)
	}
	for _, op := range operations {
		if op.name == name {
			return op.access != nil && op.access(app.Principal{Role: r, Active: true}) != nil
		}
	}
	panic("no operation " + name)
}

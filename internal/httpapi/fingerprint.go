package httpapi

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// A fingerprint (EXT.IDEMPOTENCY.KEY.001) is the SHA-256 of a canonical form
// of the request: the operation's name, the form's version and the mapped
// command, written out under field names frozen here. It never depends on
// Go's struct field names, so renaming a field or splitting a command
// leaves stored fingerprints valid: a client whose response was lost
// retries across a deploy and replays, never 422 idempotency_key_reused.
// Credentials and the key are not part of it. Ids are in their one
// canonical spelling (uuid's lower case with dashes), so /v1/orders/ABC… and
// /v1/orders/abc… are one request; If-Match versions are a sorted set
// (RFC 9110 gives the list set semantics), so "v1", "v5" and "v5", "v1" are
// one request. The operation name stands for the route (method and
// pattern): the key's scope already includes it.
//
// Adding an operation: its form in its entry of its resource file's list
// of operations (orderOperations in orders.go, …; operations.go joins the
// lists), and its golden line in testdata/fingerprints.golden (the test
// fails until it is there; go test -run TestFingerprintGolden -update
// writes it). The command the line pins is filled from the form's command
// type, every field set (fillCommand, fingerprint_fill_internal_test.go);
// no test file is edited. Only the operations pinned before the filler
// keep a hand-written command (goldenCommands), a frozen list.
//
// Changing a form (a field added to the request, say): never edit a form in
// place. Add the new form, version+1, in front of the old one; the old one
// stays listed for at least one IDEMPOTENCY_TTL after the release that ships
// the new one, so that a record written before the deploy still replays
// (app.Key.Previous), and is removed in a later release, before the form
// changes again. TestFingerprintGolden pins every listed form of every
// operation, one line per operation and form version in
// testdata/fingerprints.golden: a new version is a new line, and a pinned
// line never changes.
//
// Version 0 (legacyForm) is how releases before canonical forms computed a
// fingerprint: the route and the command's Go JSON. It is listed as the
// previous form of every operation those releases had, so that a request
// they recorded still replays when retried after the upgrade (the contract:
// a retry across an upgrade replays, never 422). Remove the legacyForm
// entries in a release shipped at least one IDEMPOTENCY_TTL after this one.
//
// The forms of all keyed operations, by name, are fingerprintForms
// (operations.go).
//
// Patterns and rule ids: docs/patterns.md.

// canonical is one form's content: frozen member names and values that
// are strings, integers, optional ones (nil pointers are null), lists of
// these, or canonical values.
// encoding/json writes a map's members sorted by name, so the bytes depend
// on the content only.
type canonical map[string]any

// fingerprintForm is one version of an operation's canonical form: of
// gives its content, or, for version 0 only, raw gives the exact bytes
// the releases before canonical forms hashed. command is the type of the
// commands it takes, from which TestFingerprintGolden fills the golden
// command of an operation that has no hand-written one.
type fingerprintForm struct {
	version int
	command reflect.Type
	of      func(command any) (canonical, error)
	raw     func(command any) ([]byte, error)
}

// formOf is a form for the commands of type C.
func formOf[C any](version int, of func(C) canonical) fingerprintForm {
	return fingerprintForm{version: version, command: reflect.TypeFor[C](), of: func(command any) (canonical, error) {
		c, ok := command.(C)
		if !ok {
			var want C
			return nil, fmt.Errorf("fingerprint form v%d takes %T, not %T", version, want, command)
		}
		return of(c), nil
	}}
}

// id is an id's canonical spelling.
func id(v uuid.UUID) string { return v.String() }

// legacyForm is version 0: what the releases before canonical forms
// hashed, byte for byte. That was the method, the route pattern, the path
// parameters sorted by name (chi's "*" of the /v1 subrouter, always empty,
// then "id" in its canonical spelling when the route has one, given by
// pathID) and encoding/json's output for the command struct of the time,
// whose member names and order wire reproduces. Frozen: never edit it.
func legacyForm[C any](method, pattern string, pathID func(C) uuid.UUID, wire func(C) any) fingerprintForm {
	return fingerprintForm{version: 0, command: reflect.TypeFor[C](), raw: func(command any) ([]byte, error) {
		c, ok := command.(C)
		if !ok {
			var want C
			return nil, fmt.Errorf("fingerprint form v0 takes %T, not %T", want, command)
		}
		body, err := json.Marshal(wire(c))
		if err != nil {
			return nil, err
		}
		b := append([]byte(method), 0)
		b = append(b, pattern...)
		b = append(b, "\x00*="...) // chi's empty wildcard parameter of the /v1 subrouter
		if pathID != nil {
			b = append(b, 0)
			b = append(b, "id="+pathID(c).String()...)
		}
		b = append(b, 0)
		return append(b, body...), nil
	}}
}

// versionList is an If-Match list in the order sent, as version 0 kept it.
func versionList(vs []domain.Version) []int64 {
	if vs == nil {
		return nil // null, as encoding/json wrote a nil list
	}
	out := make([]int64, len(vs))
	for i, v := range vs {
		out[i] = int64(v)
	}
	return out
}

// versionSet is an If-Match list as a set: sorted, each version once.
func versionSet(vs []domain.Version) []int64 {
	out := make([]int64, 0, len(vs))
	for _, v := range vs {
		out = append(out, int64(v))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// fingerprints returns the fingerprint of command under the operation's
// current form, and under its previous form while that is still listed
// (zero when it is not). An operation lists at most two forms.
func fingerprints(forms map[string][]fingerprintForm, operation string, command any) (current, previous [32]byte, err error) {
	fs := forms[operation]
	if len(fs) == 0 || len(fs) > 2 {
		return current, previous, fmt.Errorf("operation %q has %d fingerprint forms, want the current one and at most its previous one (operations.go)", operation, len(fs))
	}
	if current, err = fs[0].sum(operation, command); err != nil || len(fs) == 1 {
		return current, previous, err
	}
	previous, err = fs[1].sum(operation, command)
	return current, previous, err
}

// sum hashes the form's canonical bytes.
func (f fingerprintForm) sum(operation string, command any) ([32]byte, error) {
	b, err := f.canonicalBytes(operation, command)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(b), nil
}

// canonicalBytes is what is hashed: {"form":{"operation","version"},"input":…}
// (version 0: the bytes legacyForm gives).
func (f fingerprintForm) canonicalBytes(operation string, command any) ([]byte, error) {
	if f.raw != nil {
		return f.raw(command)
	}
	input, err := f.of(command)
	if err != nil {
		return nil, err
	}
	return json.Marshal(canonical{"form": canonical{"operation": operation, "version": f.version}, "input": input})
}

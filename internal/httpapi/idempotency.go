package httpapi

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

// keyRule says whether an operation needs an Idempotency-Key.
type keyRule int

const (
	keyAccepted keyRule = iota + 1
	keyRequired
)

// parseKey reads the Idempotency-Key header: 1 to 255 printable ASCII
// characters, sent bare (abc) or as the structured-field string of the IETF
// draft ("abc"); both name the same key.
func parseKey(h []string) (key string, present bool, ok bool) {
	if len(h) == 0 {
		return "", false, true
	}
	if len(h) > 1 {
		return "", true, false
	}
	v := trimOWS(h[0])
	if strings.HasPrefix(v, `"`) {
		var b strings.Builder
		if len(v) < 2 || !strings.HasSuffix(v, `"`) {
			return "", true, false
		}
		inner := v[1 : len(v)-1]
		for i := 0; i < len(inner); i++ {
			c := inner[i]
			switch {
			case c == '\\':
				i++
				if i == len(inner) || (inner[i] != '"' && inner[i] != '\\') {
					return "", true, false
				}
				b.WriteByte(inner[i])
			case c == '"':
				return "", true, false
			default:
				b.WriteByte(c)
			}
		}
		v = b.String()
	}
	if len(v) < 1 || len(v) > 255 {
		return "", true, false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return "", true, false
		}
	}
	return v, true, true
}

// fingerprint hashes a canonical form of the request (EXT.IDEMPOTENCY.KEY.001):
// the route identity (method, route pattern, path parameters sorted by name,
// each in canonical form)
// and the mapped command, encoded as JSON from a Go struct, so that the
// caller's key order and whitespace do not change it. Credentials and the key
// itself are not part of it.
func fingerprint(r *http.Request, command any) ([32]byte, error) {
	body, err := json.Marshal(command)
	if err != nil {
		return [32]byte{}, err
	}
	h := sha256.New()
	rc := chi.RouteContext(r.Context())
	h.Write([]byte(r.Method))
	h.Write([]byte{0})
	if rc != nil {
		h.Write([]byte(rc.RoutePattern()))
		names := make([]int, len(rc.URLParams.Keys))
		for i := range names {
			names[i] = i
		}
		sort.Slice(names, func(a, b int) bool { return rc.URLParams.Keys[names[a]] < rc.URLParams.Keys[names[b]] })
		for _, i := range names {
			h.Write([]byte{0})
			h.Write([]byte(rc.URLParams.Keys[i]))
			h.Write([]byte{'='})
			h.Write([]byte(canonicalParam(rc.URLParams.Values[i])))
		}
	}
	h.Write([]byte{0})
	h.Write(body)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum, nil
}

// canonicalParam is a path parameter as the fingerprint sees it: an id in
// the one form uuid.Parse maps every spelling of it to (lower case, with
// dashes), so that /v1/orders/ABC… and /v1/orders/abc…, which name one
// resource, are one route identity. Other values are taken as sent.
func canonicalParam(v string) string {
	if id, err := uuid.Parse(v); err == nil {
		return id.String()
	}
	return v
}

// Refusals of the Idempotency-Key header.
var (
	errKeyInvalid  = domain.Errorf(domain.CodeKeyInvalid, "Idempotency-Key must be 1 to 255 printable ASCII characters, bare or as a quoted string")
	errKeyRequired = domain.Errorf(domain.CodeKeyRequired, "this operation requires an Idempotency-Key header")
)

// idempotencyKey validates the header for an operation and builds the scoped
// key with its fingerprint. It returns nil (and no error) when the key is
// optional and absent.
func idempotencyKey(r *http.Request, p app.Principal, operation string, rule keyRule, command any) (*app.Key, error) {
	value, present, ok := parseKey(r.Header.Values("Idempotency-Key"))
	if !ok {
		return nil, errKeyInvalid
	}
	if !present {
		if rule == keyRequired {
			return nil, errKeyRequired
		}
		return nil, nil
	}
	fp, err := fingerprint(r, command)
	if err != nil {
		return nil, fmt.Errorf("fingerprint: %w", err)
	}
	return &app.Key{ActorID: p.ID, Operation: operation, Value: value, Fingerprint: fp}, nil
}

// keyPresent refuses, before the body is read, an operation that requires a
// key and was sent without one.
func keyPresent(r *http.Request) error {
	if _, present, _ := parseKey(r.Header.Values("Idempotency-Key")); !present {
		return errKeyRequired
	}
	return nil
}

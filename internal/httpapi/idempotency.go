package httpapi

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/ordersvc/ordersvc/internal/app"
	"github.com/ordersvc/ordersvc/internal/domain"
)

// keyRule says whether an operation takes an Idempotency-Key.
type keyRule int

const (
	keyNone     keyRule = iota // a query, or an endpoint outside /v1
	keyAccepted                // optional: without one, a retry runs again
	keyRequired                // 400 idempotency_key_required without one
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
		if v, ok = unquote(v); !ok {
			return "", true, false
		}
	}
	if !printableKey(v) {
		return "", true, false
	}
	return v, true, true
}

// unquote reads an RFC 8941 sf-string: between double quotes, with \" and
// \\ as the only escapes and no bare double quote.
func unquote(v string) (string, bool) {
	if len(v) < 2 || !strings.HasSuffix(v, `"`) {
		return "", false
	}
	inner := v[1 : len(v)-1]
	var b strings.Builder
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		if c == '"' {
			return "", false
		}
		if c == '\\' {
			i++
			if i == len(inner) || (inner[i] != '"' && inner[i] != '\\') {
				return "", false
			}
			c = inner[i]
		}
		b.WriteByte(c)
	}
	return b.String(), true
}

// printableKey: 1 to 255 printable ASCII characters.
func printableKey(v string) bool {
	if len(v) < 1 || len(v) > 255 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

// Refusals of the Idempotency-Key header.
var (
	errKeyInvalid  = domain.Errorf(domain.CodeKeyInvalid, "Idempotency-Key must be 1 to 255 printable ASCII characters, bare or as a quoted string")
	errKeyRequired = domain.Errorf(domain.CodeKeyRequired, "this operation requires an Idempotency-Key header")
)

// idempotencyKey validates the header for an operation and builds the scoped
// key with its fingerprint. It returns nil (and no error) when the key is
// optional and absent.
func (s *Server) idempotencyKey(r *http.Request, p app.Principal, operation string, rule keyRule, command any) (*app.Key, error) {
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
	fp, previous, err := fingerprints(s.forms, operation, command)
	if err != nil {
		return nil, fmt.Errorf("fingerprint: %w", err)
	}
	return &app.Key{ActorID: p.ID, Operation: operation, Value: value, Fingerprint: fp, Previous: previous}, nil
}

// keyPresent refuses, before the body is read, an operation that requires a
// key and was sent without one.
func keyPresent(r *http.Request) error {
	if _, present, _ := parseKey(r.Header.Values("Idempotency-Key")); !present {
		return errKeyRequired
	}
	return nil
}

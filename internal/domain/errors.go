// Package domain holds the aggregates, value types and rules of the order and
// inventory service. It knows nothing of HTTP, SQL or JSON.
package domain

import (
	"errors"
	"fmt"
	"strings"
)

// Code is the stable, snake_case name of an outcome that a caller can see
// and switch on. Each is declared once, as a constant of this package: here
// the outcomes that any use case may answer and those of a request that no
// use case decides; a rule's own code beside the rule that answers it
// (CodeOverpayment in order.go, CodeCreditLimitExceeded in placement.go, …),
// or beside what it protects when a use case holds the rule (CodeLastStaff
// beside Actor: DeactivateActor counts the active staff, SERIALIZABLE),
// as an event type is declared in the file of the use case that appends it.
// The domain names codes only, and a transport maps each to its own terms:
// internal/httpapi answers a code 409 Conflict unless its table says
// otherwise, and TestEveryCodeHasAStatusAndIsDocumented finds every Code
// constant in this package's source and fails until the code is in the
// OpenAPI document with the status it answers.
type Code string

// The outcomes that any use case may answer.
const (
	CodeValidation      Code = "validation_failed"
	CodeNotFound        Code = "not_found"
	CodeVersionConflict Code = "version_conflict"
	CodeForbidden       Code = "forbidden"
)

// The outcomes of a request that no use case decides: how it was sent, who
// sent it, its idempotency key, the service's own state.
const (
	CodeMalformed            Code = "malformed_request"
	CodeTooLarge             Code = "payload_too_large"
	CodeUnauthenticated      Code = "unauthenticated"
	CodeMethodNotAllowed     Code = "method_not_allowed"
	CodePreconditionRequired Code = "precondition_required"
	CodeKeyInvalid           Code = "invalid_idempotency_key"
	CodeKeyRequired          Code = "idempotency_key_required"
	CodeKeyReused            Code = "idempotency_key_reused"
	CodeKeyInProgress        Code = "idempotency_in_progress"
	CodeUnavailable          Code = "unavailable"
	CodeInternal             Code = "internal"
)

// Error is a caller-caused outcome with a stable code and a message that is
// safe to show to the caller.
type Error struct {
	Code   Code
	Detail string
	Fields []FieldError // only for CodeValidation
}

// FieldError names one broken field rule, with the field as the caller's
// input names it, a path such as "lines[0].quantity".
type FieldError struct {
	Field   string
	Message string
}

func (e *Error) Error() string {
	if len(e.Fields) == 0 {
		return fmt.Sprintf("%s: %s", e.Code, e.Detail)
	}
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Message
	}
	return fmt.Sprintf("%s: %s (%s)", e.Code, e.Detail, strings.Join(parts, "; "))
}

// ErrorCode returns the code of the first domain error in err's chain, or ""
// when err was not caused by the caller.
func ErrorCode(err error) Code {
	var de *Error
	if errors.As(err, &de) {
		return de.Code
	}
	return ""
}

// Errorf builds an Error with a formatted detail.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// Validation collects field errors so that a caller learns every broken rule
// at once, not one per round trip.
type Validation struct {
	fields []FieldError
}

// Add records a broken rule for field.
func (v *Validation) Add(field, message string) {
	v.fields = append(v.fields, FieldError{Field: field, Message: message})
}

// Merge adds the field errors of err, prefixed with prefix, or records err's
// message against prefix when it is not a validation error.
func (v *Validation) Merge(prefix string, err error) {
	if err == nil {
		return
	}
	var de *Error
	if errors.As(err, &de) && de.Code == CodeValidation && len(de.Fields) > 0 {
		for _, f := range de.Fields {
			name := prefix
			if f.Field != "" {
				name = prefix + "." + f.Field
			}
			v.Add(name, f.Message)
		}
		return
	}
	if errors.As(err, &de) {
		v.Add(prefix, de.Detail)
		return
	}
	v.Add(prefix, err.Error())
}

// Err returns nil when no rule was broken.
func (v *Validation) Err() error {
	if len(v.fields) == 0 {
		return nil
	}
	return &Error{Code: CodeValidation, Detail: "the request breaks one or more field rules", Fields: v.fields}
}

// ErrNotFound says the resource does not exist, or is not visible to the caller.
var ErrNotFound = &Error{Code: CodeNotFound, Detail: "the resource does not exist"}

// ErrVersionConflict says the caller's version is not the current one
// (EXT.CONCURRENCY.VERSION.001). Nothing was changed.
// Patterns and rule ids: docs/patterns.md.
var ErrVersionConflict = &Error{Code: CodeVersionConflict, Detail: "the resource has changed since it was read; fetch it again and retry with the new ETag"}

// ErrValueRejected says the database refused a value that no domain rule
// caught (a data exception: out of range, or a character it does not store).
// It is the caller's input, so validation_failed, but it also means a rule
// is missing here: a transport that sees it should log it as a warning.
var ErrValueRejected = &Error{Code: CodeValidation, Detail: "a value in the request cannot be stored: it is out of range or holds a character the service does not accept"}

package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// maxBody is the largest request body accepted.
const maxBody = 1 << 20

// decode reads a JSON body strictly into dst: at most 1 MiB, no unknown
// fields, one value. The body decides, not the Content-Type header, so that a
// JSON body sent as curl's default form type is still understood and a
// non-JSON body is refused whatever its label says. Type errors name the field (422);
// anything unparsable is a malformed request (400). An empty body is allowed
// only when allowEmpty (operations that take no input).
func decode(w http.ResponseWriter, r *http.Request, dst any, allowEmpty bool) *Problem {
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return problem(codeTooLarge, fmt.Sprintf("the request body exceeds %d bytes", maxBody))
		}
		return problem(codeMalformed, "the request body could not be read")
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		if allowEmpty {
			return nil
		}
		return problem(codeMalformed, "a JSON request body is required")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeProblem(err)
	}
	if dec.More() {
		return problem(codeMalformed, "the request body must hold a single JSON value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return problem(codeMalformed, "the request body must hold a single JSON value")
	}
	return nil
}

// decodeElement decodes one element of an array strictly, so that a type
// error can name its index ("lines[1].quantity"), which encoding/json's own
// error does not.
func decodeElement(raw json.RawMessage, dst any, path string) *Problem {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeProblemAt(err, path)
	}
	return nil
}

func decodeProblem(err error) *Problem { return decodeProblemAt(err, "") }

func decodeProblemAt(err error, path string) *Problem {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := typeErr.Field
		if path != "" {
			if field == "" {
				field = path
			} else {
				field = path + "." + field
			}
		}
		if field == "" {
			return problem(codeMalformed, "the request body must be a JSON object")
		}
		p := problem("validation_failed", "the request breaks one or more field rules")
		p.Errors = []fieldError{{Field: field, Message: "must be " + jsonKind(typeErr.Type.Kind().String())}}
		return p
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "json: unknown field ") {
		return problem(codeMalformed, "unknown field "+strings.TrimPrefix(msg, "json: unknown field "))
	}
	return problem(codeMalformed, "the request body is not valid JSON")
}

func jsonKind(goKind string) string {
	switch {
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"):
		return "an integer"
	case strings.HasPrefix(goKind, "float"):
		return "a number"
	case goKind == "string":
		return "a string"
	case goKind == "slice", goKind == "array":
		return "an array"
	case goKind == "bool":
		return "a boolean"
	}
	return "an object"
}

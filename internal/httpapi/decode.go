package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/ordersvc/ordersvc/internal/domain"
)

// maxBody is the largest request body accepted.
const maxBody = 1 << 20

// strictJSON is how every request body is read (ADR 0010): member names match
// exactly (case-sensitive), a member named twice in one object is refused
// (RFC 8259 §4 leaves duplicates to each parser, so none is guessed, whatever
// escapes spell the name), unknown members are refused, and so is invalid
// UTF-8. These are the defaults of github.com/go-json-experiment/json (the
// proposed encoding/json/v2) except the unknown members, which it ignores
// unless told.
var strictJSON = json.JoinOptions(
	json.RejectUnknownMembers(true),
	jsontext.AllowDuplicateNames(false),
	jsontext.AllowInvalidUTF8(false),
	json.MatchCaseInsensitiveNames(false),
)

// decode reads a JSON body strictly into dst: at most 1 MiB, one value. The
// body decides, not the Content-Type header, so that a JSON body sent as
// curl's default form type is still understood and a non-JSON body is
// refused whatever its label says. Type errors name the field, with the
// index of an array element ("lines[1].quantity"), and are 422; anything
// unparsable or not strictly JSON is a malformed request (400). An empty body
// is allowed only when allowEmpty (operations that take no input).
func decode(w http.ResponseWriter, r *http.Request, dst any, allowEmpty bool) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return domain.Errorf(domain.CodeTooLarge, "the request body exceeds %d bytes", maxBody)
		}
		return domain.Errorf(domain.CodeMalformed, "the request body could not be read")
	}
	return decodeBytes(raw, dst, allowEmpty)
}

// decodeBytes is decode on a body already read: the part the fuzz target
// drives.
func decodeBytes(raw []byte, dst any, allowEmpty bool) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		if allowEmpty {
			return nil
		}
		return domain.Errorf(domain.CodeMalformed, "a JSON request body is required")
	}
	err := json.Unmarshal(raw, dst, strictJSON)
	if err == nil {
		return nil
	}
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) && !errors.Is(syn.Err, jsontext.ErrDuplicateName) && oneValueThenMore(raw) {
		return domain.Errorf(domain.CodeMalformed, "the request body must hold a single JSON value")
	}
	return decodeProblem(err, dst)
}

// oneValueThenMore says whether raw starts with one complete JSON value that
// is followed by something else: the reason to refuse it is then that there
// is more than one value. It runs only on refused bodies.
func oneValueThenMore(raw []byte) bool {
	dec := jsontext.NewDecoder(bytes.NewReader(raw), strictJSON)
	if _, err := dec.ReadValue(); err != nil {
		return false
	}
	_, err := dec.ReadToken()
	return !errors.Is(err, io.EOF)
}

// decodeProblem turns a decoding error into the caller's problem. Names the
// caller sent are quoted (and cut short), never interpreted.
func decodeProblem(err error, dst any) error {
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) {
		if errors.Is(syn.Err, jsontext.ErrDuplicateName) {
			where := "the top-level object"
			if at := fieldPath(syn.JSONPointer.Parent()); at != "" {
				where = at
			}
			return domain.Errorf(domain.CodeMalformed, "member %s appears twice in %s; name each member once",
				quoteName(syn.JSONPointer.LastToken()), where)
		}
		return domain.Errorf(domain.CodeMalformed, "the request body is not valid JSON")
	}
	var sem *json.SemanticError
	if !errors.As(err, &sem) {
		return domain.Errorf(domain.CodeMalformed, "the request body is not valid JSON")
	}
	if errors.Is(sem.Err, json.ErrUnknownName) {
		name := sem.JSONPointer.LastToken()
		detail := "unknown field " + quoteName(name)
		if known := caseMatch(dst, sem.JSONPointer); known != "" {
			detail += fmt.Sprintf(": member names are case-sensitive, did you mean %q?", known)
		}
		return &domain.Error{Code: domain.CodeMalformed, Detail: detail}
	}
	field := fieldPath(sem.JSONPointer)
	if field == "" {
		return domain.Errorf(domain.CodeMalformed, "the request body must be a JSON object")
	}
	var v domain.Validation
	v.Add(field, "must be "+jsonKind(sem.GoType))
	return v.Err()
}

// fieldPath writes a JSON Pointer as the field paths of validation errors:
// "/lines/1/quantity" is "lines[1].quantity". The request DTOs have no
// member whose name is a number, so a numeric token is an array index.
func fieldPath(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if _, err := strconv.ParseUint(tok, 10, 32); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// quoteName quotes a member name the caller sent, cut to 64 bytes.
func quoteName(name string) string {
	if len(name) > 64 {
		name = name[:64] + "…"
	}
	return strconv.Quote(name)
}

// caseMatch returns the member that an unknown name at ptr matches except
// for case, or "": the hint for a caller who wrote "Delta" for "delta".
func caseMatch(dst any, ptr jsontext.Pointer) string {
	t := reflect.TypeOf(dst)
	parent, name := ptr.Parent(), ptr.LastToken()
	for tok := range parent.Tokens() {
		t = deref(t)
		switch t.Kind() {
		case reflect.Slice, reflect.Array:
			t = t.Elem()
		case reflect.Struct:
			f, ok := fieldByJSONName(t, tok)
			if !ok {
				return ""
			}
			t = f.Type
		default:
			return ""
		}
	}
	t = deref(t)
	if t.Kind() != reflect.Struct {
		return ""
	}
	for i := range t.NumField() {
		if n := jsonName(t.Field(i)); n != "" && strings.EqualFold(n, name) {
			return n
		}
	}
	return ""
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if jsonName(t.Field(i)) == name {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

func jsonName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if tag == "-" {
		return ""
	}
	if tag == "" {
		return f.Name
	}
	return tag
}

// jsonKind names the JSON kind a Go type is read from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "of another type"
	}
	switch deref(t).Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Bool:
		return "a boolean"
	}
	return "an object"
}

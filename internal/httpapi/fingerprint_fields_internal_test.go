package httpapi

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// eachField calls visit with every field of v that holds one value: a
// string, number, bool, uuid or time, a map, or a pointer or a slice that
// holds nothing. It descends into structs, arrays, slices and pointers.
func eachField(v reflect.Value, path string, visit func(path string, v reflect.Value)) {
	switch {
	case v.Type() == reflect.TypeFor[uuid.UUID](), v.Type() == reflect.TypeFor[time.Time]():
		visit(path, v)
	case v.Kind() == reflect.Pointer && !v.IsNil():
		eachField(v.Elem(), path, visit)
	case v.Kind() == reflect.Slice && v.Len() > 0, v.Kind() == reflect.Array:
		for i := range v.Len() {
			eachField(v.Index(i), fmt.Sprintf("%s[%d]", path, i), visit)
		}
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			eachField(v.Field(i), fillPath(path, v.Type().Field(i).Name), visit)
		}
	default:
		visit(path, v)
	}
}

// unset: a field that holds its zero value, or an empty slice or map.
func unset(v reflect.Value) bool {
	return v.IsZero() || (v.Kind() == reflect.Slice || v.Kind() == reflect.Map) && v.Len() == 0
}

// zeroMembers calls report with the path of every member of a canonical
// form that is zero: "", 0, null, an empty list or object.
func zeroMembers(v reflect.Value, path string, report func(path string)) {
	if (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) && !v.IsNil() {
		zeroMembers(v.Elem(), path, report)
		return
	}
	if unset(v) {
		report(path)
	}
	switch v.Kind() {
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			zeroMembers(v.MapIndex(k), path+"."+k.String(), report)
		}
	case reflect.Slice:
		for i := range v.Len() {
			zeroMembers(v.Index(i), fmt.Sprintf("%s[%d]", path, i), report)
		}
	}
}

// TestFingerprintGoldenCommandsSetEveryField: the golden command of every
// keyed operation, hand-written or filled, sets every field of its type,
// and under each of its listed forms every member of the canonical form is
// non-zero: the pinned fingerprint depends on every field, so a form that
// changes how it writes any of them fails TestFingerprintGolden.
func TestFingerprintGoldenCommandsSetEveryField(t *testing.T) {
	t.Parallel()
	for _, op := range slices.Sorted(slices.Values(keyedOperations)) {
		cmd, err := goldenCommand(op)
		if err != nil {
			t.Errorf("%s: %v", op, err)
			continue
		}
		eachField(reflect.ValueOf(cmd), "", func(path string, v reflect.Value) {
			if unset(v) {
				t.Errorf("%s: %s is unset in its golden command (%T); a hand-written one (goldenCommands) sets it", op, path, cmd)
			}
		})
		for _, f := range fingerprintForms[op] {
			checkNoZeroMember(t, op, f, cmd)
		}
	}
}

// checkNoZeroMember: every member of form f of cmd is non-zero (version
// 0 has bytes, no members).
func checkNoZeroMember(t *testing.T, op string, f fingerprintForm, cmd any) {
	t.Helper()
	if f.of == nil {
		return
	}
	input, err := f.of(cmd)
	if err != nil {
		t.Errorf("%s v%d: %v", op, f.version, err)
		return
	}
	zeroMembers(reflect.ValueOf(input), "input", func(path string) {
		t.Errorf("%s v%d: member %s of the canonical form of the golden command is zero", op, f.version, path)
	})
}

// TestFingerprintFillIsDeterministic: filling the command of an operation
// twice gives the same command and the same canonical bytes under each of
// its forms, so the filled golden lines are stable from run to run.
func TestFingerprintFillIsDeterministic(t *testing.T) {
	t.Parallel()
	for _, op := range slices.Sorted(slices.Values(keyedOperations)) {
		for _, f := range fingerprintForms[op] {
			a, errA := fillCommand(f.command)
			b, errB := fillCommand(f.command)
			if errA != nil || errB != nil {
				t.Fatalf("%s v%d: %v, %v", op, f.version, errA, errB)
			}
			ba, errA := f.canonicalBytes(op, a)
			bb, errB := f.canonicalBytes(op, b)
			if errA != nil || errB != nil || !reflect.DeepEqual(a, b) || !bytes.Equal(ba, bb) {
				t.Errorf("%s v%d: two fillings differ:\n%+v %s\n%+v %s (%v, %v)", op, f.version, a, ba, b, bb, errA, errB)
			}
		}
	}
}

// TestFingerprintCurrentFormReadsEveryField: for every keyed operation,
// setting any one field of the filled command to its zero value changes
// the canonical bytes of the current form. Whatever the command holds
// decides the outcome; a form that leaves a field out would let two
// requests that differ in it replay each other under one key.
func TestFingerprintCurrentFormReadsEveryField(t *testing.T) {
	t.Parallel()
	for _, op := range slices.Sorted(slices.Values(keyedOperations)) {
		f := fingerprintForms[op][0]
		v, err := fillValue(f.command)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		base, err := f.canonicalBytes(op, v.Interface())
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		var paths []string
		eachField(v, "", func(path string, _ reflect.Value) { paths = append(paths, path) })
		for i, path := range paths {
			b, err := f.canonicalBytes(op, filledWithZero(f.command, i))
			switch {
			case err != nil:
				t.Errorf("%s v%d: the canonical form with %s zero: %v", op, f.version, path, err)
			case bytes.Equal(b, base):
				t.Errorf("%s v%d: the canonical form is the same with %s zero: the form leaves the field out, "+
					"and two requests that differ in it would replay each other:\n%s", op, f.version, path, base)
			}
		}
	}
}

// filledWithZero is the filled command of type t with its i-th field (in
// eachField's order) set to zero.
func filledWithZero(t reflect.Type, i int) any {
	v, _ := fillValue(t) // a fresh one: a copy would share its slices' elements
	n := 0
	eachField(v, "", func(_ string, field reflect.Value) {
		if n == i {
			field.SetZero()
		}
		n++
	})
	return v.Interface()
}

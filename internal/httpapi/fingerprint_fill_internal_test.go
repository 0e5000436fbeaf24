package httpapi

import (
	"fmt"
	"hash/fnv"
	"reflect"
	"time"

	"github.com/google/uuid"
)

// fillCommand is the golden command of an operation that has no
// hand-written one (goldenCommands): a value of the type its forms take
// with every field set, so that every member of the canonical form is
// non-zero and the pinned fingerprint depends on every field. The value of
// a field is given by its kind and its path in the command
// ("Delta", "Lines[1].ProductID"), never by its position: a string
// is "golden:" and its path, a uuid the SHA-1 uuid of its path, an integer
// (domain.Version, domain.Cents, … by their kind) a number from 1 to 100
// hashed from its path, a bool true, a time one in 2026; a pointer points
// to a filled value, a slice or a map holds two, a struct has each field
// filled. Adding a field to a command leaves the values of the others, and
// so the lines of the forms that do not read it, as they were.
//
// Frozen, like the forms: the golden lines of the filled commands depend
// on every rule above, so changing one fails TestFingerprintGolden.
// Renaming a field of a filled command changes its values, and its lines
// fail although the stored fingerprints are unaffected (the canonical form
// does not know Go's names): keep the old line by pinning the command as
// it was filled, under the old paths (fillString("OldName"), …), in
// goldenCommands.
func fillCommand(t reflect.Type) (any, error) {
	v, err := fillValue(t)
	if err != nil {
		return nil, err
	}
	return v.Interface(), nil
}

// fillValue is fillCommand's value, settable.
func fillValue(t reflect.Type) (reflect.Value, error) {
	if t == nil {
		return reflect.Value{}, fmt.Errorf("no command type: a form made without formOf or legacyForm")
	}
	v := reflect.New(t).Elem()
	return v, fill(v, "")
}

// The value of a field of each kind, from its path in the command.
func fillString(path string) string  { return "golden:" + path }
func fillUUID(path string) uuid.UUID { return uuid.NewSHA1(uuid.NameSpaceOID, []byte("golden:"+path)) }
func fillInt(path string) uint64     { return 1 + uint64(pathHash(path)%100) }
func fillTime(path string) time.Time {
	return time.Date(2026, 1, 1, 0, 0, int(pathHash(path)%86400), 0, time.UTC)
}

func pathHash(path string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(path))
	return h.Sum32()
}

// fillPath is the path of the field name of the struct at path.
func fillPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// fill sets v, found at path in the command.
func fill(v reflect.Value, path string) error {
	switch v.Type() {
	case reflect.TypeFor[uuid.UUID]():
		v.Set(reflect.ValueOf(fillUUID(path)))
		return nil
	case reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(fillTime(path)))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fillString(path))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(fillInt(path)))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(fillInt(path))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(fillInt(path)) + 0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		return fill(v.Elem(), path)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		return fillElements(v, path)
	case reflect.Array:
		return fillElements(v, path)
	case reflect.Map:
		return fillMap(v, path)
	case reflect.Struct:
		return fillStruct(v, path)
	default:
		return fmt.Errorf("%s: a %s, which fillCommand cannot fill: teach it the type (fingerprint_fill_internal_test.go)", path, v.Type())
	}
	return nil
}

func fillElements(v reflect.Value, path string) error {
	for i := range v.Len() {
		if err := fill(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
			return err
		}
	}
	return nil
}

func fillStruct(v reflect.Value, path string) error {
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			return fmt.Errorf("%s: %s has unexported fields, which fillCommand cannot set: teach it the type (fingerprint_fill_internal_test.go)", fillPath(path, f.Name), v.Type())
		}
		if err := fill(v.Field(i), fillPath(path, f.Name)); err != nil {
			return err
		}
	}
	return nil
}

func fillMap(v reflect.Value, path string) error {
	v.Set(reflect.MakeMap(v.Type()))
	for i := range 2 {
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		if err := fill(k, fmt.Sprintf("%s{%d}", path, i)); err != nil {
			return err
		}
		if err := fill(e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
			return err
		}
		v.SetMapIndex(k, e)
	}
	return nil
}

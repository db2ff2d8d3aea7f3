package scenario

import (
	"fmt"
	"reflect"
	"testing"
)

// fill sets every exported field reachable from v to a value that is not
// its zero, slices and maps with elements and pointers with a pointee, so
// a field added to the spec later is filled, and checked, too.
func fill(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString("s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(t, p.Elem(), path)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range s.Len() {
			fill(t, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k, path+"[key]")
		fill(t, e, path+"[value]")
		m := reflect.MakeMap(v.Type())
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		forExported(v, path, func(f reflect.Value, p string) { fill(t, f, p) })
	default:
		t.Fatalf("%s: the test cannot fill a %s; teach it, and Spec.clone to copy it", path, v.Type())
	}
}

// mutate changes, in place, every value fill set, calling changed after
// each write: through a slice's array, a map, a pointer the clone shares
// with its original, the write shows in the original.
func mutate(t *testing.T, v reflect.Value, path string, changed func(path string)) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "'")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 1)
	case reflect.Pointer:
		if !v.IsNil() {
			mutate(t, v.Elem(), path, changed)
		}
		return
	case reflect.Slice:
		for i := range v.Len() {
			mutate(t, v.Index(i), fmt.Sprintf("%s[%d]", path, i), changed)
		}
		return
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			p := fmt.Sprintf("%s[%v]", path, k)
			mutate(t, e, p, changed)
			v.SetMapIndex(k, e)
			changed(p)
		}
		return
	case reflect.Struct:
		forExported(v, path, func(f reflect.Value, p string) { mutate(t, f, p, changed) })
		return
	default:
		t.Fatalf("%s: the test cannot change a %s", path, v.Type())
	}
	changed(path)
}

// forExported calls fn on each exported field of the struct v; a type
// whose fields are all unexported (netip.Addr) is a value set as a whole.
func forExported(v reflect.Value, path string, fn func(f reflect.Value, path string)) {
	for i := range v.NumField() {
		if f := v.Type().Field(i); f.IsExported() {
			fn(v.Field(i), path+"."+f.Name)
		}
	}
}

func TestSpecCloneSharesNothingWithItsOriginal(t *testing.T) {
	var orig, want Spec
	fill(t, reflect.ValueOf(&orig).Elem(), "Spec")
	fill(t, reflect.ValueOf(&want).Elem(), "Spec")
	clone := orig.clone()
	if !reflect.DeepEqual(clone, &want) {
		t.Fatalf("the clone differs from its original:\n%+v\n%+v", clone, want)
	}
	writes := 0
	mutate(t, reflect.ValueOf(clone).Elem(), "Spec", func(path string) {
		writes++
		if !reflect.DeepEqual(&orig, &want) {
			t.Fatalf("writing the clone's %s changed the original", path)
		}
	})
	if writes == 0 || reflect.DeepEqual(clone, &want) {
		t.Fatal("the test changed nothing in the clone")
	}
}

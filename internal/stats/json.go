package stats

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
)

// NonFiniteKey is the JSON member that says, field by field, what a null
// figure was.
const NonFiniteKey = "non_finite"

// NonFiniteName says what a float JSON cannot carry is: "NaN", "+Inf" or
// "-Inf"; "" for a finite number.
func NonFiniteName(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return ""
}

// MarshalFinite writes the struct v as encoding/json would, except that a
// float field that is NaN or infinite, which JSON cannot carry, is written
// as null and named in a NonFiniteKey object with what it was: a null alone
// would not say why, and a stored value is never a reason for a report to
// fail. v is a flat struct of the caller's plain type (one without this
// MarshalJSON method, so that it is not called again); its fields'
// names and omitempty follow their json tags.
func MarshalFinite(v any) ([]byte, error) {
	rv := reflect.ValueOf(v)
	rt := rv.Type()
	var buf bytes.Buffer
	nonFinite := map[string]string{}
	buf.WriteByte('{')
	for i := range rt.NumField() {
		f := rt.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fv := rv.Field(i)
		if opts == "omitempty" && isEmpty(fv) {
			continue
		}
		var b []byte
		if k := fv.Kind(); (k == reflect.Float64 || k == reflect.Float32) && NonFiniteName(fv.Float()) != "" {
			nonFinite[name] = NonFiniteName(fv.Float())
			b = []byte("null")
		} else {
			var err error
			if b, err = json.Marshal(fv.Interface()); err != nil {
				return nil, err
			}
		}
		if buf.Len() > 1 {
			buf.WriteByte(',')
		}
		key, _ := json.Marshal(name)
		buf.Write(key)
		buf.WriteByte(':')
		buf.Write(b)
	}
	if len(nonFinite) > 0 {
		b, err := json.Marshal(nonFinite) // its keys sorted: the output is stable
		if err != nil {
			return nil, err
		}
		if buf.Len() > 1 {
			buf.WriteByte(',')
		}
		buf.WriteString(`"` + NonFiniteKey + `":`)
		buf.Write(b)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// isEmpty is encoding/json's omitempty test.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Struct:
		return false
	}
	return v.IsZero()
}

// MarshalJSON writes a figure that is not a finite number as null, with
// what it was (MarshalFinite).
func (s Summary) MarshalJSON() ([]byte, error) {
	type plain Summary
	return MarshalFinite(plain(s))
}

// MarshalJSON writes a ratio that is not a finite number (to a baseline
// of 0) as null, with what it was (MarshalFinite).
func (n Normalized) MarshalJSON() ([]byte, error) {
	type plain Normalized
	return MarshalFinite(plain(n))
}

// MarshalJSON writes a figure that is not a finite number as null, with
// what it was (MarshalFinite).
func (e Estimate) MarshalJSON() ([]byte, error) {
	type plain Estimate
	return MarshalFinite(plain(e))
}

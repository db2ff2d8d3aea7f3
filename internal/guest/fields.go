package guest

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Field is a scenario field of a guest group that a kind takes beyond
// those every group has (name, kind, runtime, count, network, cpus,
// memory, cpu_limit, image, security): the kind declares it, with what it
// allows, and the scenario reads it into the group's Spec through it, so
// the one declaration checks a scenario's text at its line and a Spec a
// program built (Kind.New, CheckFields).
type Field struct {
	// Key is the field as a scenario writes it ("vcpus").
	Key string
	// Value is what the field holds and allows.
	Value FieldValue
	// at is where the field lives in a Spec: a *string, *int or *bool;
	// nil for a field held in Spec.Own, whose text own reads.
	at  func(*Spec) any
	own ownType
}

// ownType is how a field held in Spec.Own reads its text.
type ownType int

const (
	ownText ownType = iota
	ownInt
	ownBool
)

// Own holds a guest's values of its kind's fields that no member of Spec
// holds (OwnTextField, OwnIntField, OwnBoolField), by key, as the texts
// the fields checked: a kind keeps its new fields there rather than
// growing Spec, which every kind shares. It is never written in place
// (With returns a copy), so copies of a Spec do not share changes.
type Own map[string]string

// With is o with key set to text, or without key for "".
func (o Own) With(key, text string) Own {
	out := maps.Clone(o)
	if out == nil {
		out = Own{}
	}
	if text == "" {
		delete(out, key)
	} else {
		out[key] = text
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Text is the text of key, "" when not given.
func (o Own) Text(key string) string { return o[key] }

// Int is the whole number of key, which its OwnIntField checked; 0 when
// not given.
func (o Own) Int(key string) int {
	i, _ := strconv.Atoi(o[key])
	return i
}

// Bool is the boolean of key, which its OwnBoolField checked; false when
// not given.
func (o Own) Bool(key string) bool { return o[key] == "true" }

// FieldValue says how a field's scalar is read and what it allows.
type FieldValue struct {
	// Allowed are the strings a text field takes; none takes any.
	Allowed []string
	// Min and Max bound a whole number.
	Min, Max int
	// CPUList: the text is a host CPU list ("0-3"), checked against the
	// host it runs on.
	CPUList bool
	// File: the text names a regular file of at most MaxBytes, relative to
	// the scenario's directory; Want says what it must be, for errors.
	File     bool
	MaxBytes int64
	Want     string
	// Check, when set, refuses a text its own grammar does not allow (a
	// URI), saying what it wants.
	Check func(string) error
	// Spread: a group may give a list of texts, over which its guests are
	// spread round robin, guest i taking text i mod n.
	Spread bool
}

// TextField is a field held in a string of the Spec; allowed, when given,
// are all it may be.
func TextField(key string, at func(*Spec) *string, allowed ...string) Field {
	return Field{Key: key, Value: FieldValue{Allowed: allowed}, at: func(s *Spec) any { return at(s) }}
}

// CheckedTextField is a field held in a string of the Spec whose text
// check allows.
func CheckedTextField(key string, at func(*Spec) *string, check func(string) error) Field {
	return Field{Key: key, Value: FieldValue{Check: check}, at: func(s *Spec) any { return at(s) }}
}

// OwnTextField is a field held in Spec.Own; allowed, when given, are all
// it may be.
func OwnTextField(key string, allowed ...string) Field {
	return Field{Key: key, Value: FieldValue{Allowed: allowed}, own: ownText}
}

// OwnIntField is a whole number from min to max held in Spec.Own.
func OwnIntField(key string, min, max int) Field {
	return Field{Key: key, Value: FieldValue{Min: min, Max: max}, own: ownInt}
}

// OwnBoolField is true or false, held in Spec.Own (false as not given).
func OwnBoolField(key string) Field {
	return Field{Key: key, own: ownBool}
}

// Spreading is f, taking a list over which a group's guests spread.
func Spreading(f Field) Field {
	f.Value.Spread = true
	return f
}

// IntField is a whole number from min to max held in an int of the Spec;
// 0, the zero value, stands for "not given".
func IntField(key string, at func(*Spec) *int, min, max int) Field {
	return Field{Key: key, Value: FieldValue{Min: min, Max: max}, at: func(s *Spec) any { return at(s) }}
}

// BoolField is true or false, held in a bool of the Spec.
func BoolField(key string, at func(*Spec) *bool) Field {
	return Field{Key: key, at: func(s *Spec) any { return at(s) }}
}

// CPUListField is a host CPU list held in a string of the Spec.
func CPUListField(key string, at func(*Spec) *string) Field {
	return Field{Key: key, Value: FieldValue{CPUList: true}, at: func(s *Spec) any { return at(s) }}
}

// FileField is the path of a regular file of at most maxBytes, held in a
// string of the Spec; want says what the file is.
func FileField(key string, at func(*Spec) *string, maxBytes int64, want string) Field {
	return Field{Key: key, Value: FieldValue{File: true, MaxBytes: maxBytes, Want: want}, at: func(s *Spec) any { return at(s) }}
}

// Set reads the scenario's text into the field of s; the error says what
// is allowed, for the field's line.
func (f Field) Set(s *Spec, text string) error {
	if f.at == nil {
		if err := f.checkOwn(text); err != nil {
			return err
		}
		if f.own == ownBool && text == "false" {
			text = ""
		}
		s.Own = s.Own.With(f.Key, text)
		return nil
	}
	switch dst := f.at(s).(type) {
	case *string:
		*dst = text
	case *bool:
		b, err := ParseBool(text)
		if err != nil {
			return err
		}
		*dst = b
	case *int:
		i, err := ParseInt(text, f.Value.Min, f.Value.Max)
		if err != nil {
			return err
		}
		*dst = i
	}
	return f.check(*s)
}

// IsSet says whether s gives the field a value.
func (f Field) IsSet(s Spec) bool {
	if f.at == nil {
		return s.Own[f.Key] != ""
	}
	switch v := f.at(&s).(type) {
	case *string:
		return *v != ""
	case *int:
		return *v != 0
	case *bool:
		return *v
	}
	return false
}

// check refuses a value of s the field does not allow.
func (f Field) check(s Spec) error {
	if f.at == nil {
		if text := s.Own[f.Key]; text != "" {
			return f.checkOwn(text)
		}
		return nil
	}
	switch v := f.at(&s).(type) {
	case *string:
		return f.checkText(*v)
	case *int:
		if *v != 0 && (*v < f.Value.Min || *v > f.Value.Max) {
			_, err := ParseInt(strconv.Itoa(*v), f.Value.Min, f.Value.Max)
			return err
		}
	}
	return nil
}

// checkText refuses a text the field does not allow; "" is not given.
func (f Field) checkText(text string) error {
	if len(f.Value.Allowed) > 0 && text != "" && !slices.Contains(f.Value.Allowed, text) {
		return fmt.Errorf("%q is not allowed: want one of %s", text, strings.Join(f.Value.Allowed, ", "))
	}
	if f.Value.Check != nil && text != "" {
		return f.Value.Check(text)
	}
	return nil
}

// checkOwn refuses a text a field held in Spec.Own does not allow.
func (f Field) checkOwn(text string) error {
	switch f.own {
	case ownInt:
		_, err := ParseInt(text, f.Value.Min, f.Value.Max)
		return err
	case ownBool:
		_, err := ParseBool(text)
		return err
	}
	return f.checkText(text)
}

// ParseBool reads true or false, and nothing else that might mean one
// (1, yes, on): YAML itself disagrees between versions on which do.
func ParseBool(text string) (bool, error) {
	if text != "true" && text != "false" {
		return false, fmt.Errorf("%q is not allowed: want true or false", text)
	}
	return text == "true", nil
}

// ParseInt reads a whole number in [min, max]; max is math.MaxInt when
// only the lower bound matters.
func ParseInt(text string, min, max int) (int, error) {
	i, err := strconv.Atoi(text)
	if err != nil || i < min || i > max {
		want := fmt.Sprintf(">= %d", min)
		if max != math.MaxInt {
			want = fmt.Sprintf("from %d to %d", min, max)
		}
		return 0, fmt.Errorf("%q is not allowed: want a whole number %s", text, want)
	}
	return i, nil
}

// WithFields is implemented by kinds that take fields of their own.
type WithFields interface {
	Fields() []Field
}

// FieldsOf returns the fields a registered kind takes of its own.
func FieldsOf(kind string) []Field {
	regMu.RLock()
	k := kinds[kind]
	regMu.RUnlock()
	if f, ok := k.(WithFields); ok {
		return f.Fields()
	}
	return nil
}

// KindsTaking names the registered kinds that take a field of this key,
// for an error that says where a misplaced field belongs.
func KindsTaking(key string) []string {
	var out []string
	for _, name := range KindNames() {
		for _, f := range FieldsOf(name) {
			if f.Key == key {
				out = append(out, name)
			}
		}
	}
	return out
}

// CheckSpec refuses a spec that gives a field the kind does not take (one
// of another kind's), a value its kind's own field does not allow, or a
// network its kind does not join by: what the scenario refuses at its
// line, for a Spec a program built. Each kind's New calls it.
func CheckSpec(kind string, s Spec) error {
	s.Kind = kind
	switch net := TraitsOf(s).Network; {
	case net == NetOwn && (s.NetNS != "" || s.Tap != nil):
		return fmt.Errorf("kind %s joins no run's network: its guests are on the network of the system they run in (a cluster's pod network, whose plugin is the path)", kind)
	case s.Tap != nil && net != NetTap:
		return fmt.Errorf("kind %s joins a network namespace, not a tap", kind)
	case s.NetNS != "" && net == NetTap:
		return fmt.Errorf("kind %s cannot join a network namespace: its network comes as a tap device", kind)
	}
	mine := map[string]bool{}
	for _, f := range FieldsOf(kind) {
		mine[f.Key] = true
		if err := f.check(s); err != nil {
			return fmt.Errorf("%s: %v", f.Key, err)
		}
	}
	var foreign []string
	for _, name := range KindNames() {
		for _, f := range FieldsOf(name) {
			if !mine[f.Key] && f.IsSet(s) && !slices.Contains(foreign, f.Key) {
				foreign = append(foreign, f.Key)
			}
		}
	}
	if len(foreign) > 0 {
		return fmt.Errorf("kind %s takes no %s", kind, strings.Join(foreign, ", "))
	}
	return nil
}

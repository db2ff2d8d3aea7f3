package guest

import (
	"context"
	"strings"
	"testing"
)

// fieldKind takes fields of its own, as a plug-in kind does.
type fieldKind struct {
	name   string
	traits Traits
	fields []Field
}

func (k fieldKind) Name() string                      { return k.name }
func (fieldKind) Probe(context.Context, string) error { return nil }
func (fieldKind) New(Spec, Env) (Guest, error)        { return nil, nil }
func (k fieldKind) Traits() Traits                    { return k.traits }
func (k fieldKind) Fields() []Field                   { return k.fields }

func init() {
	Register(fieldKind{name: "fields-vm", traits: Traits{Network: NetTap}, fields: []Field{
		IntField("vcpus", func(s *Spec) *int { return &s.VCPUs }, 1, 8),
		TextField("accel", func(s *Spec) *string { return &s.Accel }, "kvm", "tcg"),
		BoolField("memory_merge", func(s *Spec) *bool { return &s.MemoryMerge }),
	}})
	Register(fieldKind{name: "fields-plain"})
	Register(fieldKind{name: "fields-own", fields: []Field{
		OwnIntField("shards", 1, 4), OwnTextField("mode", "fast", "safe"), OwnBoolField("sealed"),
	}})
}

// A kind's fields that no member of Spec holds are read, checked and
// refused elsewhere as the others are, each copy of a Spec its own.
func TestOwnFieldsLiveInTheSpecsOwnValues(t *testing.T) {
	fields := FieldsOf("fields-own")
	var s Spec
	for i, text := range []string{"3", "safe", "true"} {
		if err := fields[i].Set(&s, text); err != nil {
			t.Fatalf("%s = %s: %v", fields[i].Key, text, err)
		}
	}
	if s.Own.Int("shards") != 3 || s.Own.Text("mode") != "safe" || !s.Own.Bool("sealed") {
		t.Fatalf("own values after Set = %v", s.Own)
	}
	copied := s
	if err := fields[0].Set(&copied, "1"); err != nil || s.Own.Int("shards") != 3 {
		t.Fatalf("setting a copy's field (%v) changed the original: %v", err, s.Own)
	}
	if err := fields[2].Set(&copied, "false"); err != nil || fields[2].IsSet(copied) {
		t.Errorf("sealed false: %v, still set in %v", err, copied.Own)
	}
	for i, tc := range []struct{ text, want string }{
		{"5", `"5" is not allowed: want a whole number from 1 to 4`},
		{"quick", `"quick" is not allowed: want one of fast, safe`},
		{"yes", `"yes" is not allowed: want true or false`},
	} {
		if err := fields[i].Set(&s, tc.text); err == nil || err.Error() != tc.want {
			t.Errorf("%s = %s: %v, want %q", fields[i].Key, tc.text, err, tc.want)
		}
	}
	if err := CheckSpec("fields-own", s); err != nil {
		t.Errorf("its own kind: %v", err)
	}
	if err := CheckSpec("fields-own", Spec{Own: Own{"shards": "9"}}); err == nil || !strings.Contains(err.Error(), "shards") {
		t.Errorf("a value the field does not allow: %v", err)
	}
	if err := CheckSpec("fields-plain", s); err == nil || !strings.Contains(err.Error(), "takes no shards, mode, sealed") {
		t.Errorf("another kind: %v", err)
	}
}

func TestFieldSetReadsAndChecks(t *testing.T) {
	fields := FieldsOf("fields-vm")
	var s Spec
	for i, text := range []string{"4", "tcg", "true"} {
		if err := fields[i].Set(&s, text); err != nil {
			t.Fatalf("%s = %s: %v", fields[i].Key, text, err)
		}
	}
	if s.VCPUs != 4 || s.Accel != "tcg" || !s.MemoryMerge {
		t.Fatalf("spec after Set = %+v", s)
	}
	for i, tc := range []struct{ text, want string }{
		{"9", `"9" is not allowed: want a whole number from 1 to 8`},
		{"hvf", `"hvf" is not allowed: want one of kvm, tcg`},
		{"yes", `"yes" is not allowed: want true or false`},
	} {
		if err := fields[i].Set(&s, tc.text); err == nil || err.Error() != tc.want {
			t.Errorf("%s = %s: %v, want %q", fields[i].Key, tc.text, err, tc.want)
		}
	}
}

func TestCheckSpecRefusesWhatTheKindDoesNotTake(t *testing.T) {
	for _, tc := range []struct {
		kind string
		spec Spec
		want string
	}{
		{"fields-vm", Spec{VCPUs: 2, Accel: "kvm"}, ""},
		{"fields-vm", Spec{VCPUs: 9}, `vcpus: "9" is not allowed`},
		{"fields-vm", Spec{NetNS: "/run/netns/x"}, "cannot join a network namespace"},
		{"fields-plain", Spec{VCPUs: 2, MemoryMerge: true}, "kind fields-plain takes no vcpus, memory_merge"},
		{"fields-plain", Spec{Tap: &TapConfig{}}, "joins a network namespace, not a tap"},
		{"fields-plain", Spec{CPUs: "0"}, ""},
	} {
		err := CheckSpec(tc.kind, tc.spec)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s %+v: %v, want %q", tc.kind, tc.spec, err, tc.want)
		}
	}
	if got := KindsTaking("accel"); len(got) != 1 || got[0] != "fields-vm" {
		t.Errorf("KindsTaking(accel) = %v", got)
	}
}

// leftoverKind keeps state of its own, as an OCI runtime does.
type leftoverKind struct{ fieldKind }

var leftoverState []string

func (leftoverKind) Leftovers() []string { return leftoverState }

func init() { Register(leftoverKind{fieldKind{name: "fields-leftover"}}) }

func TestLeftoversAsksEveryKindThatKeepsState(t *testing.T) {
	leftoverState = []string{"record c1"}
	if got := Leftovers(); len(got) != 1 || got[0] != "record c1" {
		t.Fatalf("Leftovers() = %v", got)
	}
}

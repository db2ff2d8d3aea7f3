package session

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/store"
)

func probeKinds(t *testing.T, w *bytes.Buffer, specs ...*scenario.Spec) error {
	t.Helper()
	ask := newProber()
	return dropRefused(specs, w, func(g scenario.GuestGroup) error { return ask.kind(context.Background(), g) })
}

func groupNames(s *scenario.Spec) []string {
	var names []string
	for _, g := range s.Guests {
		names = append(names, g.Name)
	}
	return names
}

func TestProbeKindsProbesEachKindAndRuntimeOnceAndNamesTheGroup(t *testing.T) {
	probed.probed = nil
	spec := &scenario.Spec{Guests: []scenario.GuestGroup{
		{Name: "a", Spec: guest.Spec{Kind: probed.name, Runtime: "r1"}},
		{Name: "b", Spec: guest.Spec{Kind: probed.name, Runtime: "r1"}},
		{Name: "c", Spec: guest.Spec{Kind: probed.name, Runtime: "r2"}},
	}}
	var w bytes.Buffer
	if err := probeKinds(t, &w, spec); err != nil {
		t.Fatal(err)
	}
	if want := []string{"r1", "r2"}; !reflect.DeepEqual(probed.probed, want) {
		t.Fatalf("probed runtimes %v, want %v", probed.probed, want)
	}

	spec.Guests = append(spec.Guests, scenario.GuestGroup{Name: "d", Spec: guest.Spec{Kind: probed.name, Runtime: "none"}})
	err := probeKinds(t, &w, spec)
	if !errors.Is(err, errNoRuntime) || !strings.Contains(err.Error(), `guest group "d"`) {
		t.Fatalf("probing a runtime the host lacks: %v; want it, naming group d", err)
	}
}

func TestARefusedOptionalGroupIsDroppedAndARequiredOneIsAnError(t *testing.T) {
	spec := func(optional bool) *scenario.Spec {
		return &scenario.Spec{Guests: []scenario.GuestGroup{
			{Name: "base", Spec: guest.Spec{Kind: probed.name}},
			{Name: "gone", Optional: optional, Spec: guest.Spec{Kind: probed.name, Runtime: "absent"}},
			{Name: "kept", Optional: true, Spec: guest.Spec{Kind: probed.name, Runtime: "r1"}},
		}}
	}
	var w bytes.Buffer
	opt := spec(true)
	if err := probeKinds(t, &w, opt); err != nil {
		t.Fatalf("a refused optional group: %v; want it dropped", err)
	}
	if got, want := groupNames(opt), []string{"base", "kept"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("groups left %v, want %v", got, want)
	}
	want := []store.DroppedGroup{{Name: "gone", Kind: probed.name, Runtime: "absent", Reason: "not supported on this host: absent is not installed"}}
	if !reflect.DeepEqual(opt.Dropped, want) {
		t.Fatalf("dropped %+v, want %+v", opt.Dropped, want)
	}
	if got := w.String(); got != `vfleet: optional guest group "gone" (session-probed absent) is not run here: not supported on this host: absent is not installed`+"\n" {
		t.Fatalf("said %q", got)
	}

	req := spec(false)
	err := probeKinds(t, &w, req)
	if !errors.Is(err, guest.ErrNotSupported) || !strings.Contains(err.Error(), `guest group "gone"`) {
		t.Fatalf("a refused required group: %v; want the refusal, naming the group", err)
	}
	if len(req.Guests) != 3 || req.Dropped != nil {
		t.Fatalf("a refused required group changed the spec: %v, dropped %v", groupNames(req), req.Dropped)
	}
}

// Only "this host cannot run it" drops a group: any other refusal (a
// broken probe) stays an error however optional the group.
func TestAnOptionalGroupWhoseProbeFailsOtherwiseIsAnError(t *testing.T) {
	spec := &scenario.Spec{Guests: []scenario.GuestGroup{{Name: "g", Optional: true, Spec: guest.Spec{Kind: probed.name, Runtime: "none"}}}}
	if err := probeKinds(t, &bytes.Buffer{}, spec); !errors.Is(err, errNoRuntime) {
		t.Fatalf("got %v, want the probe's own error", err)
	}
}

// Both sides of an A/B run drop the same groups: each question is asked
// once, whichever side asks it, and the drop is said once.
func TestBothSidesOfAnABRunDropTheSameGroups(t *testing.T) {
	probed.probed = nil
	side := func() *scenario.Spec {
		return &scenario.Spec{Guests: []scenario.GuestGroup{
			{Name: "base", Spec: guest.Spec{Kind: probed.name}},
			{Name: "gone", Optional: true, Spec: guest.Spec{Kind: probed.name, Runtime: "absent"}},
		}}
	}
	a, b := side(), side()
	var w bytes.Buffer
	if err := probeKinds(t, &w, a, b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Guests, b.Guests) || !reflect.DeepEqual(a.Dropped, b.Dropped) || len(a.Dropped) != 1 {
		t.Fatalf("A kept %v dropped %v; B kept %v dropped %v", groupNames(a), a.Dropped, groupNames(b), b.Dropped)
	}
	if want := []string{"", "absent"}; !reflect.DeepEqual(probed.probed, want) {
		t.Fatalf("probed %v, want each runtime once for both sides: %v", probed.probed, want)
	}
	if n := strings.Count(w.String(), "\n"); n != 1 {
		t.Fatalf("said %d times: %q", n, w.String())
	}
	// Each side expands to the same guests, so the runs alternate step by
	// step over the same groups.
	pa, pb := a.Expand(), b.Expand()
	if len(pa.Guests) != len(pb.Guests) || len(pa.Steps) != len(pb.Steps) {
		t.Fatalf("A plans %d guests, %d steps; B %d, %d", len(pa.Guests), len(pa.Steps), len(pb.Guests), len(pb.Steps))
	}
}

// specProbed asks for the whole spec and refuses a group that wants "kvm".
type specProbed struct {
	probingKind
	asked int
}

func (k *specProbed) ProbeSpec(_ context.Context, s guest.Spec, env guest.Env) error {
	k.asked++
	if s.Accel == "kvm" {
		return errors.Join(guest.ErrNotSupported, errors.New("kvm: no"))
	}
	return nil
}

var specKind = &specProbed{probingKind: probingKind{name: "session-spec"}}

func init() { guest.Register(specKind) }

func TestASpecProbersRefusalDropsOptionalGroupsOnce(t *testing.T) {
	side := func() *scenario.Spec {
		return &scenario.Spec{Guests: []scenario.GuestGroup{
			{Name: "base", Spec: guest.Spec{Kind: probed.name}},
			{Name: "tcg", Optional: true, Spec: guest.Spec{Kind: specKind.name, Accel: "tcg"}},
			{Name: "kvm", Optional: true, Spec: guest.Spec{Kind: specKind.name, Accel: "kvm"}},
		}}
	}
	a, b := side(), side()
	ask := newProber()
	err := dropRefused([]*scenario.Spec{a, b}, &bytes.Buffer{}, func(g scenario.GuestGroup) error {
		return ask.spec(context.Background(), g, guest.Env{RootFS: "/image"})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*scenario.Spec{a, b} {
		if got := groupNames(s); !reflect.DeepEqual(got, []string{"base", "tcg"}) || len(s.Dropped) != 1 || s.Dropped[0].Name != "kvm" {
			t.Fatalf("kept %v, dropped %+v", got, s.Dropped)
		}
	}
	if specKind.asked != 2 {
		t.Fatalf("ProbeSpec asked %d times; want once per spec of the group, for both sides", specKind.asked)
	}
}

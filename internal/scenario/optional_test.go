package scenario

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/store"
)

func TestOptionalParses(t *testing.T) {
	o := Options{KnownKinds: []string{"host", "container"}}
	src := "name: t\nguests:\n  - kind: host\n  - {name: c, kind: container, runtime: crun, optional: true}\n  - {name: r, kind: container}\nworkloads:\n  - workload: scenario-test\n"
	spec, err := Parse("t.yaml", []byte(src), o)
	if err != nil {
		t.Fatal(err)
	}
	if got := []bool{spec.Guests[0].Optional, spec.Guests[1].Optional, spec.Guests[2].Optional}; !reflect.DeepEqual(got, []bool{false, true, false}) {
		t.Fatalf("optional = %v", got)
	}
	_, err = Parse("t.yaml", []byte(strings.Replace(src, "optional: true", "optional: yes", 1)), o)
	if err == nil || !strings.Contains(err.Error(), `t.yaml:4:57: guests[1].optional: "yes" is not allowed: want true or false`) {
		t.Fatalf("optional: yes: %v", err)
	}
}

// The baseline and the noise group are what the others are measured
// against and next to: a run without them means nothing.
func TestBaselineAndNoiseGroupCannotBeOptional(t *testing.T) {
	o := Options{KnownKinds: []string{"host", "container"}}
	for _, c := range []struct{ src, want string }{
		{"name: t\nguests:\n  - {kind: host, optional: true}\n  - kind: container\nworkloads:\n  - workload: scenario-test\n",
			`t.yaml:3:28: guests[0].optional: the baseline group "host" cannot be optional`},
		{"name: t\nbaseline: c\nguests:\n  - kind: host\n  - name: c\n    kind: container\n    optional: true\nworkloads:\n  - workload: scenario-test\n",
			`t.yaml:7:15: guests[1].optional: the baseline group "c" cannot be optional`},
		{"name: t\nnoise: {profiles: [cpu], on: n, cpus: \"0\"}\nguests:\n  - kind: host\n  - {name: n, kind: container, optional: true}\n  - kind: container\nworkloads:\n  - workload: scenario-test\n",
			`t.yaml:5:42: guests[1].optional: the noise group "n" cannot be optional`},
	} {
		_, err := Parse("t.yaml", []byte(c.src), o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.src, err, c.want)
		}
	}
	// optional: false says nothing, even on the baseline.
	if _, err := Parse("t.yaml", []byte("name: t\nguests:\n  - {kind: host, optional: false}\nworkloads:\n  - workload: scenario-test\n"), o); err != nil {
		t.Fatal(err)
	}
}

func TestDropRefusedDropsOnlyRefusedOptionalGroups(t *testing.T) {
	notHere := fmt.Errorf("%w: crun is not installed", guest.ErrNotSupported)
	refuse := func(g GuestGroup) error {
		if g.Runtime == "crun" {
			return notHere
		}
		return nil
	}
	s := &Spec{Guests: []GuestGroup{{Name: "host", Spec: guest.Spec{Kind: "host"}}, {Name: "c", Optional: true, Spec: guest.Spec{Kind: "container", Runtime: "crun"}}, {Name: "r", Spec: guest.Spec{Kind: "container"}}}}
	dropped, err := s.DropRefused(refuse)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.DroppedGroup{{Name: "c", Kind: "container", Runtime: "crun", Reason: notHere.Error()}}
	if !reflect.DeepEqual(dropped, want) || !reflect.DeepEqual(s.Dropped, want) || len(s.Guests) != 2 || s.Guests[1].Name != "r" {
		t.Fatalf("dropped %+v, spec's %+v, left %+v", dropped, s.Dropped, s.Guests)
	}
	// Its plan has none of the dropped group's guests or steps.
	for _, st := range s.Expand().Steps {
		if st.Group == "c" {
			t.Fatalf("a step of the dropped group: %+v", st)
		}
	}

	s = &Spec{Guests: []GuestGroup{{Name: "host", Spec: guest.Spec{Kind: "host"}}, {Name: "c", Spec: guest.Spec{Kind: "container", Runtime: "crun"}}}}
	if _, err := s.DropRefused(refuse); !errors.Is(err, guest.ErrNotSupported) || !strings.Contains(err.Error(), `guest group "c"`) || len(s.Guests) != 2 {
		t.Fatalf("a refused required group: %v, left %+v", err, s.Guests)
	}
	broken := errors.New("the probe broke")
	s = &Spec{Guests: []GuestGroup{{Name: "c", Optional: true, Spec: guest.Spec{Kind: "container"}}}}
	if _, err := s.DropRefused(func(GuestGroup) error { return broken }); !errors.Is(err, broken) {
		t.Fatalf("an optional group whose probe broke: %v", err)
	}
}

// The frontier needs the baseline and technologies every Linux host runs
// (runc, a VM under TCG) even when each optional one is refused, and the
// whole study must stay short enough to run under TCG.
func TestIsolationSpectrumWithoutItsOptionalGroups(t *testing.T) {
	spec, err := Load("isolation-spectrum", Options{KnownKinds: guest.KindNames(), Host: &testHost})
	if err != nil {
		t.Fatal(err)
	}
	var total time.Duration
	for _, st := range spec.Expand().Steps {
		total += st.Duration
	}
	if total > 7*time.Minute {
		t.Errorf("measures for %s nominally with every group; keep it under 7m", total)
	}
	if _, err := spec.DropRefused(func(g GuestGroup) error {
		if g.Optional {
			return guest.ErrNotSupported
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, g := range spec.Guests {
		kept = append(kept, g.Name)
	}
	if want := []string{"host", "runc", "microvm"}; !reflect.DeepEqual(kept, want) {
		t.Fatalf("groups every host runs: %v, want %v", kept, want)
	}
	var dropped []string
	for _, d := range spec.Dropped {
		dropped = append(dropped, d.Name)
	}
	if want := []string{"crun", "gvisor", "lxc", "vm-kvm"}; !reflect.DeepEqual(dropped, want) {
		t.Fatalf("optional groups %v, want %v", dropped, want)
	}
}

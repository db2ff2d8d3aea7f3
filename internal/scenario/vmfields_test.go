package scenario

import (
	"strings"
	"testing"
)

func TestVMFieldsParseAndExpand(t *testing.T) {
	o := Options{KnownKinds: []string{"host", "vm"}, Traits: testTraits}
	src := `name: t
guests:
  - kind: host
  - kind: vm
    runtime: microvm
    arch: amd64
    vcpus: 2
    accel: tcg
    disk: copy
    memory_merge: true
    pin_vcpus: "0-1"
    rt_priority: 10
workloads:
  - workload: scenario-test
`
	spec, err := Parse("t.yaml", []byte(src), o)
	if err != nil {
		t.Fatal(err)
	}
	g := spec.Expand().Guests[1].Spec
	if g.VCPUs != 2 || g.Accel != "tcg" || g.Disk != "copy" || g.PinVCPUs != "0-1" || !g.MemoryMerge || g.RTPriority != 10 || g.Runtime != "microvm" || g.Arch != "amd64" {
		t.Fatalf("expanded VM spec = %+v", g)
	}
	bad := strings.NewReplacer("arch: amd64", "arch: sparc64", "vcpus: 2", "vcpus: 0", "accel: tcg", "accel: hvf", "disk: copy", "disk: thin", "memory_merge: true", "memory_merge: maybe",
		`pin_vcpus: "0-1"`, `pin_vcpus: "1-0"`, "rt_priority: 10", "rt_priority: 100").Replace(src)
	_, err = Parse("t.yaml", []byte(bad), o)
	if err == nil {
		t.Fatal("bad VM fields accepted")
	}
	for _, want := range []string{"guests[1].arch", "one of amd64, arm64", "guests[1].vcpus", "guests[1].accel", "guests[1].disk", "guests[1].memory_merge", "guests[1].pin_vcpus", "guests[1].rt_priority", "one of auto, kvm, tcg"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestSecurityParsesAndReachesTheGuest(t *testing.T) {
	o := Options{KnownKinds: []string{"host", "container"}, Traits: testTraits}
	src := "name: t\nguests:\n  - kind: host\n  - kind: container\n    security: userns\nworkloads:\n  - workload: scenario-test\n"
	spec, err := Parse("t.yaml", []byte(src), o)
	if err != nil {
		t.Fatal(err)
	}
	if g := spec.Expand().Guests[1].Spec; g.Security != "userns" {
		t.Fatalf("expanded security = %q", g.Security)
	}
	_, err = Parse("t.yaml", []byte(strings.Replace(src, "userns", "paranoid", 1)), o)
	if err == nil || !strings.Contains(err.Error(), "t.yaml:5:15: guests[1].security") || !strings.Contains(err.Error(), "default, unconfined, privileged, userns, sandbox") {
		t.Fatalf("unknown profile: %v", err)
	}
}

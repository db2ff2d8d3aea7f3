package scenario

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/workload"
)

func TestVMFieldsParseAndExpand(t *testing.T) {
	o := Options{KnownKinds: []string{"host", "vm"}, Host: &testHost}
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
	if g.VCPUs != 2 || g.Accel != "tcg" || g.Own.Text("disk") != "copy" || g.PinVCPUs != "0-1" || !g.MemoryMerge || g.RTPriority != 10 || g.Runtime != "microvm" || g.Arch != "amd64" {
		t.Fatalf("expanded VM spec = %+v", g)
	}
	bad := strings.NewReplacer("arch: amd64", "arch: sparc64", "vcpus: 2", "vcpus: 0", "accel: tcg", "accel: hvf", "disk: copy", "disk: thin", "memory_merge: true", "memory_merge: 1",
		`pin_vcpus: "0-1"`, `pin_vcpus: "1-0"`, "rt_priority: 10", "rt_priority: 100").Replace(src)
	_, err = Parse("t.yaml", []byte(bad), o)
	if err == nil {
		t.Fatal("bad VM fields accepted")
	}
	for _, want := range []string{"guests[1].arch", "one of amd64, arm64", "guests[1].vcpus", "guests[1].accel", "guests[1].disk", `guests[1].memory_merge: "1" is not allowed: want true or false`, "guests[1].pin_vcpus", "guests[1].rt_priority", "one of auto, kvm, tcg"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestSecurityParsesAndReachesTheGuest(t *testing.T) {
	o := Options{KnownKinds: []string{"host", "container"}}
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

// A CPU list naming a CPU the host lacks, or memory beyond the host's,
// would do nothing (interrupts left where they are) or fail only once
// guests start: refused at its line, saying what this host has.
func TestSettingsBeyondTheHostAreRefused(t *testing.T) {
	small := Host{CPUs: []int{0, 1}, MemoryBytes: 2 << 30}
	o := Options{KnownKinds: []string{"host", "container", "vm"}, Host: &small}
	const src = `name: t
host_settings: {irq_affinity: "1"}
noise: {profiles: [none, cpu], cpus: "0"}
guests:
  - kind: host
  - {kind: vm, vcpus: 2, pin_vcpus: "0-1", memory: 2GiB}
  - {kind: container, cpus: "1"}
workloads:
  - workload: scenario-test
`
	if _, err := Parse("t.yaml", []byte(src), o); err != nil {
		t.Fatalf("what the host has is refused: %v", err)
	}
	for _, tc := range []struct{ old, new, want string }{
		{`irq_affinity: "1"`, `irq_affinity: "99"`, `t.yaml:2:31: host_settings.irq_affinity: "99" is not allowed: this host has no CPU 99 (its CPUs: 0-1)`},
		{`cpus: "0"}`, `cpus: "0,2"}`, `t.yaml:3:38: noise.cpus: "0,2" is not allowed: this host has no CPU 2 (its CPUs: 0-1)`},
		{`pin_vcpus: "0-1"`, `pin_vcpus: "1-2"`, `t.yaml:6:37: guests[1].pin_vcpus: "1-2" is not allowed: this host has no CPU 2 (its CPUs: 0-1)`},
		{`memory: 2GiB`, `memory: 2049MiB`, `t.yaml:6:52: guests[1].memory: "2049MiB" is not allowed: want at most this host's memory, 2048MiB`},
		{`cpus: "1"}`, `cpus: "3"}`, `t.yaml:7:29: guests[2].cpus: "3" is not allowed: this host has no CPU 3 (its CPUs: 0-1)`},
	} {
		_, err := Parse("t.yaml", []byte(strings.Replace(src, tc.old, tc.new, 1)), o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.new, err, tc.want)
		}
	}
}

// A scenario that runs on another machine is checked against that one,
// there: here a CPU or memory this machine lacks is no mistake, a list
// that is not one still is.
func TestSettingsElsewhereAreCheckedThere(t *testing.T) {
	o := Options{KnownKinds: []string{"host", "container"}, Elsewhere: true}
	src := "name: t\nhost_settings: {irq_affinity: \"8191\"}\nguests:\n  - kind: host\n  - {kind: container, cpus: \"4095\", memory: 4096GiB}\nworkloads:\n  - workload: scenario-test\n"
	if _, err := Parse("t.yaml", []byte(src), o); err != nil {
		t.Errorf("CPUs and memory of a machine not known yet: %v", err)
	}
	_, err := Parse("t.yaml", []byte(strings.Replace(src, `"4095"`, `"3-1"`, 1)), o)
	if err == nil || !strings.Contains(err.Error(), `guests[1].cpus: "3-1" is not allowed`) {
		t.Errorf("a CPU list that is not one: %v", err)
	}
}

// Without a host given, the scenario is checked against this machine.
func TestSettingsAreCheckedAgainstThisHostByDefault(t *testing.T) {
	h, err := ThisHost()
	if err != nil || len(h.CPUs) == 0 || h.MemoryBytes <= 0 {
		t.Fatalf("this host: %+v, %v", h, err)
	}
	src := "name: t\nhost_settings: {irq_affinity: \"8191\"}\nguests:\n  - kind: host\nworkloads:\n  - workload: scenario-test\n"
	_, err = Parse("t.yaml", []byte(src), Options{KnownKinds: []string{"host"}})
	if err == nil || !strings.Contains(err.Error(), "this host has no CPU 8191") {
		t.Errorf("a CPU this machine lacks: %v", err)
	}
}

// The files a VM is given whole are regular files of a bounded size,
// refused at their field's line otherwise: QEMU would load a directory or
// /dev/zero only after the run began, and vfleet's copy of an initrd from
// /dev/zero would never end.
func TestVMBootFilesAreBoundedRegularFiles(t *testing.T) {
	o := Options{KnownKinds: []string{"host", "vm"}}
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge")
	if err := os.WriteFile(huge, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, guest.MaxInitrdBytes+1); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	disk, kernel := filepath.Join(dir, "disk.qcow2"), filepath.Join(dir, "vmlinuz")
	for _, f := range []string{disk, kernel} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// An error quotes a long path's first characters only.
	clip := workload.Clip
	for _, tc := range []struct{ field, value, want string }{
		{"kernel", dir, "guests[1].kernel: " + clip(dir) + " is a directory, not a regular file: give a regular file of at most 256 MiB"},
		{"kernel", "/dev/zero", "guests[1].kernel: /dev/zero is a character device, not a regular file"},
		{"initrd", "/dev/zero", "guests[1].initrd: /dev/zero is a character device, not a regular file: give a regular file of at most 2 GiB"},
		{"initrd", fifo, "guests[1].initrd: " + clip(fifo) + " is a named pipe, not a regular file"},
		{"initrd", huge, "guests[1].initrd: " + clip(huge) + " is too large: 2147483649 bytes, and at most 2 GiB are allowed"},
		{"kernel", huge, "guests[1].kernel: " + clip(huge) + " is too large: 2147483649 bytes, and at most 256 MiB are allowed"},
		{"image", dir, "guests[1].image: " + clip(dir) + " is a directory, not a regular file: give a regular file of at most 1 TiB"},
	} {
		k, img := kernel, disk
		if tc.field == "kernel" {
			k = tc.value
		}
		if tc.field == "image" {
			img = tc.value
		}
		group := "{kind: vm, image: " + img + ", kernel: " + k + "}"
		if tc.field == "initrd" {
			group = "{kind: vm, image: " + img + ", kernel: " + k + ", initrd: " + tc.value + "}"
		}
		_, err := Parse("t.yaml", []byte("name: t\nguests:\n  - kind: host\n  - "+group+"\nworkloads:\n  - workload: scenario-test\n"), o)
		at := fmt.Sprintf("t.yaml:4:%d: ", 5+strings.Index(group, tc.field+": ")+len(tc.field)+2)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), at+tc.want) {
			t.Errorf("%s: %s: err = %v, want %q", tc.field, tc.value, err, tc.want)
		}
	}
}

// A libvirt URI is checked at its line: the forms vfleet takes, and never
// one that skips the check of the remote host's key.
func TestLibvirtURIIsCheckedAtItsLine(t *testing.T) {
	o := Options{KnownKinds: []string{"host", "vm"}}
	src := "name: t\nguests:\n  - kind: host\n  - kind: vm\n    libvirt: URI\nworkloads:\n  - workload: scenario-test\n"
	dir := t.TempDir()
	key, fifo := filepath.Join(dir, "k"), filepath.Join(dir, "fifo")
	if err := os.WriteFile(key, []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, uri := range []string{"qemu:///system", "qemu+ssh://root@lab2/system", "qemu+ssh://root@lab2:2222/system?keyfile=" + key + "&known_hosts=" + dir + "/kh"} {
		spec, err := Parse("t.yaml", []byte(strings.Replace(src, "URI", `"`+uri+`"`, 1)), o)
		if err != nil {
			t.Fatalf("%s: %v", uri, err)
		}
		if g := spec.Expand().Guests[1].Spec; g.Libvirt != uri {
			t.Errorf("expanded libvirt = %q, want %q", g.Libvirt, uri)
		}
	}
	for uri, want := range map[string]string{
		"qemu+ssh://root@lab2/system?no_verify=1": "no_verify skips the check of the host's key",
		"qemu+tcp://lab2/system":                  "the transport, for another host, ssh",
		"qemu+ssh://lab2/system":                  "no user",
		"qemu+ssh://root@lab2/session":            "system instance",
		"qemu:///session":                         "this host's libvirt is qemu:///system",
		"qemu+ssh://root@lab2/system?command=/x":  "parameter command is not taken",
	} {
		_, err := Parse("t.yaml", []byte(strings.Replace(src, "URI", `"`+uri+`"`, 1)), o)
		if err == nil || !strings.Contains(err.Error(), "t.yaml:5:14: guests[1].libvirt: ") || !strings.Contains(err.Error(), want) ||
			!strings.Contains(err.Error(), "want qemu:///system or qemu+ssh://USER@HOST") {
			t.Errorf("%s: %v, want %q at its line", uri, err, want)
		}
	}
	// Key files are checked at load, as every key file is: never read
	// from a named pipe or a device, never missing.
	for uri, want := range map[string]string{
		"qemu+ssh://root@lab2/system?keyfile=" + fifo:                         "identity unusable: " + fifo + " is a named pipe",
		"qemu+ssh://root@lab2/system?keyfile=/dev/zero":                       "identity unusable: /dev/zero is a character device",
		"qemu+ssh://root@lab2/system?keyfile=" + dir + "/none":                "identity unusable: stat " + dir + "/none: no such file",
		"qemu+ssh://root@lab2/system?keyfile=" + key + "&known_hosts=" + fifo: "known_hosts unusable: " + fifo + " is a named pipe",
		"qemu+ssh://root@lab2/system?known_hosts=" + dir:                      "known_hosts unusable: " + dir + " is a directory",
	} {
		_, err := Parse("t.yaml", []byte(strings.Replace(src, "URI", `"`+uri+`"`, 1)), o)
		if err == nil || !strings.Contains(err.Error(), "t.yaml:5:14: guests[1].libvirt: "+want) {
			t.Errorf("%s: %v, want %q at its line", uri, err, want)
		}
	}
}

// A list of libvirt URIs spreads the group's guests over them round
// robin, each URI checked at its own line; a field that does not spread
// still takes one value.
func TestLibvirtListSpreadsGuestsRoundRobin(t *testing.T) {
	o := Options{KnownKinds: []string{"host", "vm"}}
	src := "name: t\nguests:\n  - kind: host\n  - name: lv\n    kind: vm\n    count: 5\n    libvirt: [\"qemu:///system\", \"qemu+ssh://root@lab2/system\"]\nworkloads:\n  - workload: scenario-test\n"
	spec, err := Parse("t.yaml", []byte(src), o)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range spec.Expand().Guests[1:] {
		got = append(got, g.Spec.Name+"@"+g.Spec.Libvirt)
	}
	want := []string{"lv-0@qemu:///system", "lv-1@qemu+ssh://root@lab2/system", "lv-2@qemu:///system", "lv-3@qemu+ssh://root@lab2/system", "lv-4@qemu:///system"}
	if !slices.Equal(got, want) {
		t.Errorf("guests %v, want %v", got, want)
	}
	if v := spec.Guests[1].Variants(); len(v) != 2 || v[0].Libvirt != "qemu:///system" || v[1].Libvirt != "qemu+ssh://root@lab2/system" {
		t.Errorf("variants %+v", v)
	}
	_, err = Parse("t.yaml", []byte(strings.Replace(src, "qemu+ssh://root@lab2/system", "qemu+ssh://lab2/system", 1)), o)
	if err == nil || !strings.Contains(err.Error(), "t.yaml:7:33: guests[1].libvirt[1]: ") || !strings.Contains(err.Error(), "no user") {
		t.Errorf("a bad URI in the list: %v", err)
	}
	_, err = Parse("t.yaml", []byte(strings.Replace(src, "count: 5", "count: 5\n    accel: [kvm, tcg]", 1)), o)
	if err == nil || !strings.Contains(err.Error(), "guests[1].accel: want a single value") {
		t.Errorf("a list for a field that does not spread: %v", err)
	}
}

// A libvirt guest on a network is checked at the group's network line:
// this host's libvirt on a path whose VM device is a tap, another host's
// on none.
func TestLibvirtNetworkIsCheckedAtItsLine(t *testing.T) {
	o := Options{KnownKinds: []string{"host", "vm"}}
	src := "name: t\nnetwork: {path: bridge}\nguests:\n  - kind: host\n  - kind: vm\n    libvirt: URI\n    network: PATH\nworkloads:\n  - workload: scenario-test\n"
	parse := func(uri, path string) error {
		_, err := Parse("t.yaml", []byte(strings.NewReplacer("URI", uri, "PATH", path).Replace(src)), o)
		return err
	}
	for _, path := range []string{"bridge", "routed", "ovs", "xdp", "tc"} {
		if err := parse("qemu:///system", path); err != nil {
			t.Errorf("this host's libvirt on %s: %v", path, err)
		}
	}
	for _, path := range []string{"macvtap", "macvlan", "user"} {
		if err := parse("qemu:///system", path); err == nil || !strings.Contains(err.Error(), "t.yaml:7:14: guests[1].network: ") || !strings.Contains(err.Error(), "opens by name") {
			t.Errorf("this host's libvirt on %s: %v", path, err)
		}
	}
	if err := parse("qemu+ssh://root@lab2/system", "bridge"); err == nil || !strings.Contains(err.Error(), "the path is on this one") {
		t.Errorf("a remote libvirt on a path: %v", err)
	}
	if err := parse(`["qemu:///system", "qemu+ssh://root@lab2/system"]`, "bridge"); err == nil || !strings.Contains(err.Error(), "the path is on this one") {
		t.Errorf("a group spread to a remote libvirt on a path: %v", err)
	}
}

// image libvirt:DOMAIN names a domain at the group's libvirt, no file:
// nothing is looked for on disk, and a group without libvirt is told
// where the domain would be looked up.
func TestImageNamesALibvirtDomain(t *testing.T) {
	var checked []string
	o := Options{KnownKinds: []string{"host", "vm"}, Host: &testHost, CheckImage: func(s guest.Spec) error {
		checked = append(checked, s.Image)
		return nil
	}, CheckGuest: func(g GuestGroup) error {
		if _, ok := g.LibvirtDomain(); ok && g.Libvirt == "" {
			return errors.New("the kind says it again")
		}
		return nil
	}}
	src := "name: t\nguests:\n  - kind: host\n  - kind: vm\n    image: libvirt:web-1\n    libvirt: qemu:///system\nworkloads:\n  - workload: scenario-test\n"
	spec, err := Parse("t.yaml", []byte(src), o)
	if err != nil {
		t.Fatal(err)
	}
	if g := spec.Expand().Guests[1].Spec; g.Image != "libvirt:web-1" || g.Libvirt != "qemu:///system" || len(checked) != 0 {
		t.Errorf("spec = %+v, files checked %v", g, checked)
	}
	for _, c := range []struct{ old, new, want string }{
		{"    libvirt: qemu:///system\n", "", "t.yaml:5:12: guests[1].image: image libvirt:web-1 needs libvirt: URI on the group"},
		{"libvirt:web-1", `"libvirt:"`, `t.yaml:5:12: guests[1].image: "libvirt:" is not allowed: give libvirt:DOMAIN`},
		{"libvirt:web-1", "libvirt:../web", `guests[1].image: "libvirt:../web" is not allowed`},
	} {
		_, err := Parse("t.yaml", []byte(strings.Replace(src, c.old, c.new, 1)), o)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "says it again") {
			t.Errorf("%q for %q: %v, want %q once", c.new, c.old, err, c.want)
		}
	}
}

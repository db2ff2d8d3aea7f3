package audit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/audit/probe"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/store"
)

// The evidence under testdata was recorded by vfleet's agent in real
// guests of each kind and profile, and by vfleet on the same host.
func evidence(t *testing.T, name string) probe.Evidence {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var e probe.Evidence
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

func findings(t *testing.T, name string) map[string]Finding {
	t.Helper()
	out := map[string]Finding{}
	kernel := ""
	if strings.HasPrefix(name, "container-runsc") {
		kernel = guest.KernelGVisor
	}
	for _, f := range Assess(evidence(t, name), evidence(t, "host-reference"), kernel) {
		if f.Probe == "" || f.Evidence == "" {
			t.Errorf("%s: %s has no probe or evidence: %+v", name, f.Property, f)
		}
		out[f.Property] = f
	}
	if len(out) != len(Properties) {
		t.Errorf("%s: %d properties assessed, want %d", name, len(out), len(Properties))
	}
	return out
}

func expect(t *testing.T, guest string, f map[string]Finding, property, value string, v Verdict) {
	t.Helper()
	got := f[property]
	if !strings.Contains(got.Value, value) || got.Verdict != v {
		t.Errorf("%s %s = %q (%s), want %q (%s); evidence %s", guest, property, got.Value, got.Verdict, value, v, got.Evidence)
	}
}

func TestAssessRecordedGuests(t *testing.T) {
	def := findings(t, "container-default")
	for _, p := range Properties {
		if def[p].Verdict == Weaker || def[p].Verdict == Stronger {
			t.Errorf("the default container is the reference, yet %s is %s: %+v", p, def[p].Verdict, def[p])
		}
	}
	expect(t, "default", def, "seccomp", "filter (1)", AsDefault)
	expect(t, "default", def, "keyctl", "blocked (EPERM)", AsDefault)
	expect(t, "default", def, "capabilities", "14 (the default set)", AsDefault)

	unconfined := findings(t, "container-unconfined")
	expect(t, "unconfined", unconfined, "seccomp", "none", Weaker)
	expect(t, "unconfined", unconfined, "keyctl", "allowed", Weaker)
	expect(t, "unconfined", unconfined, "no_new_privs", "not set", Weaker)

	priv := findings(t, "container-privileged")
	expect(t, "privileged", priv, "capabilities", "SYS_ADMIN", Weaker)
	expect(t, "privileged", priv, "kernel settings writable", "core_pattern", Weaker)
	expect(t, "privileged", priv, "devices openable", "/dev/kvm", Weaker)
	expect(t, "privileged", priv, "kernel modules loadable", "yes", Weaker)

	userns := findings(t, "container-userns")
	expect(t, "userns", userns, "user namespace", "root is host ID 1073741824", Stronger)
	expect(t, "userns", userns, "capabilities", "own user namespace", Stronger)

	host := findings(t, "host-baseline")
	expect(t, "host", host, "namespaces shared with the host", "pid", Weaker)
	expect(t, "host", host, "host processes visible", "all", Weaker)

	// gVisor's probes read its application kernel's own account: facts,
	// not scores, but for the kernel itself and what it hides.
	gv := findings(t, "container-runsc")
	expect(t, "runsc", gv, "kernel", "gVisor's application kernel (says Linux 4.4.0)", Stronger)
	expect(t, "runsc", gv, "seccomp", "none (in gVisor's kernel)", Info)
	expect(t, "runsc", gv, "no_new_privs", "not reported by gVisor's kernel", Info)
	expect(t, "runsc", gv, "user namespace", "not comparable", Info)
	expect(t, "runsc", gv, "capabilities", "in gVisor's kernel", Info)
	expect(t, "runsc", gv, "namespaces shared with the host", "none (gVisor's own)", Stronger)
	expect(t, "runsc", gv, "host processes visible", "none", Stronger)

	// Recorded with the bundle's filter applied in the sandbox
	// (--oci-seccomp): gVisor says a filter is on, not how many.
	gvFiltered := findings(t, "container-runsc-oci-seccomp")
	expect(t, "runsc --oci-seccomp", gvFiltered, "seccomp", "filter (in gVisor's kernel)", Info)

	vm := findings(t, "vm-microvm-sandbox")
	expect(t, "vm", vm, "kernel", "its own", Stronger)
	expect(t, "vm", vm, "namespaces shared with the host", "none", Stronger)
	expect(t, "vm", vm, "root file system", "ext4 on /dev/vda", Info)
}

// LXC gives each container a boot_id of its own: the kernel's boot time
// and release, the host's, still say it is the host's kernel, and the
// container is judged as one. A VM's boot time is its own.
func TestABootIDOfItsOwnIsNoKernelOfItsOwn(t *testing.T) {
	host := evidence(t, "host-reference")
	host.BootTime = "1764050000"
	lxc := evidence(t, "container-default")
	lxc.BootID, lxc.BootTime = "0c7b8a55-6a1f-4a5e-9d38-54fa1f3b0d21", host.BootTime
	f := map[string]Finding{}
	for _, x := range Assess(lxc, host, "") {
		f[x.Property] = x
	}
	expect(t, "lxc", f, "kernel", "the host's", AsDefault)
	expect(t, "lxc", f, "seccomp", "filter (1)", AsDefault)
	vm := evidence(t, "vm-microvm-sandbox")
	vm.BootTime = "1764050042"
	if !OwnKernel(vm, host) {
		t.Error("a VM booted after the host is judged the host's kernel")
	}
	vm.BootTime = ""
	if !OwnKernel(vm, host) {
		t.Error("a VM recorded before boot times were probed is judged the host's kernel")
	}
}

func TestParsersOnRecordedStatus(t *testing.T) {
	s := ParseStatus(evidence(t, "container-default").Status)
	if s.Seccomp != 2 || s.SeccompFilters != 1 || !s.NoNewPrivs || len(s.Effective) != 14 || len(s.Bounding) != 14 {
		t.Errorf("default container status = %+v", s)
	}
	if h := ParseStatus(evidence(t, "host-reference").Status); h.Seccomp != 0 || h.NoNewPrivs || len(h.Effective) < 38 {
		t.Errorf("host status = %+v", h)
	}
	if u := ParseUIDMap(evidence(t, "container-userns").UIDMap); !u.Mapped || u.RootHostID != 1073741824 {
		t.Errorf("userns uid_map = %+v", u)
	}
	if u := ParseUIDMap(evidence(t, "container-default").UIDMap); u.Mapped {
		t.Errorf("default uid_map = %+v", u)
	}
	if got := RootFSType("27 1 254:0 / / rw,relatime - ext4 /dev/vda rw"); got != "ext4 on /dev/vda" {
		t.Errorf("root fs = %q", got)
	}
	if got := ParseStatus("garbage"); got.Seccomp != 0 || got.Effective != nil {
		t.Errorf("garbage status = %+v", got)
	}
}

func TestSummarizeScoresGroupsAndReach(t *testing.T) {
	rec := func(guest, group, name string) store.AuditRecord {
		b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		return store.AuditRecord{Guest: guest, Group: group, Kind: "container", Evidence: b}
	}
	rep, err := Summarize([]store.AuditRecord{rec("", "", "host-reference"), rec("p-0", "p", "container-privileged"),
		rec("p-1", "p", "container-default"), rec("m", "m", "container-macvlan")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Groups) != 2 || rep.Groups[0].Group != "p" || rep.Groups[0].Weaker == 0 || len(rep.Groups[0].Differing) != 1 {
		t.Fatalf("groups = %+v", rep.Groups)
	}
	m := rep.Groups[1]
	if r := m.Reach[probe.TargetPeer]; r.Reached != 1 {
		t.Errorf("macvlan guest to the peer = %+v, want reached", r)
	}
	if r := m.Reach[probe.TargetHostSide]; r.Reached != 0 || r.Why == "" {
		t.Errorf("macvlan guest to the host side = %+v, want not reached, with why", r)
	}
	if len(rep.Targets) == 0 || rep.Targets[0] != probe.TargetPeer {
		t.Errorf("targets = %v, want the peer first", rep.Targets)
	}
	if _, err := Summarize([]store.AuditRecord{{Guest: "x", Evidence: json.RawMessage("{")}}, nil); err == nil {
		t.Error("broken evidence accepted")
	}
	if rep, err := Summarize(nil, nil); err != nil || len(rep.Groups) != 0 {
		t.Errorf("no audit: %+v, %v", rep, err)
	}
}

func TestRootNamespaceReachedOnlyBySharingOrALink(t *testing.T) {
	host := evidence(t, "host-reference")
	for _, c := range []struct {
		guest string
		links []string
		want  bool
	}{
		{"host-baseline", nil, true},
		{"container-default", nil, false},
		{"vm-microvm-sandbox", nil, false},
		{"container-default", []string{"vfleet-r1-hs/up-x"}, true},
		{"container-runsc", nil, false},
		{"container-runsc", []string{"vfleet-r1-hs/up-x"}, true},
	} {
		h := host
		h.LinksIntoRoot = c.links
		kernel := ""
		if c.guest == "container-runsc" {
			kernel = guest.KernelGVisor
		}
		got, why := reachesRoot(evidence(t, c.guest), h, kernel)
		if got != c.want || why == "" {
			t.Errorf("%s with links %v: reaches the root namespace = %v (%s), want %v", c.guest, c.links, got, why, c.want)
		}
	}
}

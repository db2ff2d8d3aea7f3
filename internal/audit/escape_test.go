package audit

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vfleet/vfleet/internal/audit/attack"
	"github.com/vfleet/vfleet/internal/audit/probe"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/store"
)

// TestJudgeAttacks: what an attempt reached is the host's only when it is
// the host's own root, namespace or kernel; in a kernel of the guest's
// own everything that went through is contained.
func TestJudgeAttacks(t *testing.T) {
	host := probe.Evidence{BootID: "b-host", BootTime: "100", Kernel: "6.1", RootID: "254:1:2",
		Namespaces: map[string]string{"mnt": "mnt:[1]", "pid": "pid:[2]"}}
	ok := func(name, reached string) attack.Attempt {
		return attack.Attempt{Name: name, Outcome: attack.Succeeded, Evidence: "it went through", Reached: reached}
	}
	container := probe.Evidence{BootID: "b-host", BootTime: "100", Kernel: "6.1", RootID: "0:50:1",
		Namespaces: map[string]string{"mnt": "mnt:[9]", "pid": "pid:[8]"}}
	vm := probe.Evidence{BootID: "b-vm", BootTime: "200", Kernel: "6.1", RootID: "254:1:2"}
	for _, tc := range []struct {
		name   string
		g      probe.Evidence
		kernel string
		a      attack.Attempt
		want   EscapeVerdict
	}{
		{"blocked", container, "", attack.Attempt{Name: attack.CorePattern, Outcome: attack.Blocked, By: "open for writing: EROFS"}, EscapeBlocked},
		{"core_pattern on the host's kernel", container, "", ok(attack.CorePattern, ""), Escaped},
		{"core_pattern in a VM", vm, "", ok(attack.CorePattern, ""), EscapeContained},
		{"core_pattern in gVisor", container, guest.KernelGVisor, ok(attack.CorePattern, ""), EscapeContained},
		{"its own root by /proc/1/root", container, "", ok(attack.ProcRoot, "0:50:1"), EscapeContained},
		{"the host's root by /proc/1/root", container, "", ok(attack.ProcRoot, "254:1:2"), Escaped},
		// A VM's root may carry the host's numbers: its kernel is another.
		{"a VM's root like the host's", vm, "", ok(attack.ProcRoot, "254:1:2"), EscapeContained},
		{"the host's root by handle", container, "", ok(attack.Shocker, "254:1:2"), Escaped},
		{"handles allowed, no root reached", container, "", ok(attack.Shocker, ""), EscapeContained},
		{"its own mount namespace", container, "", ok(attack.ProcNS, "mnt:[9]"), EscapeContained},
		{"the host's mount namespace", container, "", ok(attack.ProcNS, "mnt:[1]"), Escaped},
		{"its own pid 1", container, "", ok(attack.Ptrace, "pid:[8]"), EscapeContained},
		{"the host's pid 1", container, "", ok(attack.Ptrace, "pid:[2]"), Escaped},
		{"its own copy of the binary", container, "", ok(attack.ExeOverwrite, "0:50"), EscapeContained},
		{"a binary bound in from the host", container, "", ok(attack.ExeOverwrite, "254:1"), Escaped},
		{"a user namespace of its own", container, "", ok(attack.UserNSMount, ""), EscapeContained},
		{"a host block device", container, "", ok(attack.BlockDevice, "254:1"), Escaped},
	} {
		g := tc.g
		g.Attacks = []attack.Attempt{tc.a}
		got := JudgeAttacks(g, host, tc.kernel)
		if len(got) != 1 || got[0].Verdict != tc.want || got[0].Detail == "" {
			t.Errorf("%s: %+v, want %s", tc.name, got, tc.want)
		}
	}
}

// TestEscapesAreCounted: a group's escapes are counted in its summary.
func TestEscapesAreCounted(t *testing.T) {
	es := []Escape{{Verdict: Escaped}, {Verdict: EscapeBlocked}, {Verdict: Escaped}, {Verdict: EscapeContained}}
	if n := escapedCount(es); n != 2 {
		t.Errorf("escapedCount = %d, want 2", n)
	}
}

// TestSummarizeRecordedEscapeAttempts judges escape attempts recorded by
// `vfleet audit --attack` in real guests on one host: the privileged
// container escapes by the cgroup release agent, core_pattern and a
// handle to the host's root; the default one is blocked in each; an
// unconfined LXC container reaches the host's root by handle through a
// bind mount from the host; nothing of a microVM's or gVisor's does.
func TestSummarizeRecordedEscapeAttempts(t *testing.T) {
	rec := func(name, file string) store.AuditRecord {
		b, err := os.ReadFile(filepath.Join("testdata", file+".json"))
		if err != nil {
			t.Fatal(err)
		}
		return store.AuditRecord{Guest: name, Group: name, Kind: "container", Evidence: b}
	}
	rep, err := Summarize([]store.AuditRecord{rec("", "attack-host-reference"), rec("privileged", "attack-runc-privileged"),
		rec("default", "attack-runc-default"), rec("lxc", "attack-lxc-unconfined"), rec("vm", "attack-microvm"), rec("gvisor", "attack-gvisor")},
		map[string]store.GuestRecord{"gvisor": {Details: map[string]string{guest.KernelDetail: guest.KernelGVisor}}})
	if err != nil {
		t.Fatal(err)
	}
	verdicts := map[string]map[string]EscapeVerdict{}
	escaped := map[string]int{}
	for _, g := range rep.Groups {
		verdicts[g.Group] = map[string]EscapeVerdict{}
		for _, e := range g.Attacks {
			verdicts[g.Group][e.Attempt] = e.Verdict
		}
		escaped[g.Group] = g.Escaped
	}
	for _, want := range []struct {
		group, attempt string
		verdict        EscapeVerdict
	}{
		{"privileged", attack.ReleaseAgent, Escaped},
		{"privileged", attack.CorePattern, Escaped},
		{"privileged", attack.Shocker, Escaped},
		{"privileged", attack.ProcRoot, EscapeContained},
		{"default", attack.ReleaseAgent, EscapeBlocked},
		{"default", attack.CorePattern, EscapeBlocked},
		{"default", attack.Shocker, EscapeBlocked},
		{"default", attack.UserNSMount, EscapeBlocked},
		{"lxc", attack.Shocker, Escaped},
		{"vm", attack.CorePattern, EscapeContained},
	} {
		if got := verdicts[want.group][want.attempt]; got != want.verdict {
			t.Errorf("%s %s: %q, want %s", want.group, want.attempt, got, want.verdict)
		}
	}
	if escaped["default"] != 0 || escaped["vm"] != 0 || escaped["gvisor"] != 0 || escaped["privileged"] < 3 {
		t.Errorf("escapes per group: %v", escaped)
	}
}

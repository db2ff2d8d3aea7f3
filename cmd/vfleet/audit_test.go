package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/audit"
	"github.com/vfleet/vfleet/internal/audit/attack"
	"github.com/vfleet/vfleet/internal/testutil"
)

// auditScenario has every kind and every profile, on two data paths.
const auditScenario = `name: audit-all
network: {path: bridge}
guests:
  - {name: host, kind: host}
  - {name: default, kind: container, count: 2}
  - {name: unconfined, kind: container, security: unconfined}
  - {name: privileged, kind: container, security: privileged}
  - {name: userns, kind: container, security: userns}
  - {name: macvlan, kind: container, network: macvlan}
  - {name: vm, kind: vm, runtime: microvm, security: sandbox}
workloads:
  - workload: cpu
`

// TestAuditEveryKindAndProfile starts guests of every kind and profile,
// audits them with the escape attempts, and checks a known property of
// each: the profiles confine as containerd does, a VM has its own kernel,
// a bridge guest reaches the peer and its neighbours but not the host's
// namespace, a macvlan guest reaches the peer but not the host side; the
// privileged container escapes where the default one is blocked, and
// nothing of the VM's reaches the host. Nothing may be left behind, and
// nothing of the host's may change.
func TestAuditEveryKindAndProfile(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "qemu-system-x86_64", "qemu-system-x86")
	testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	c := newCLI(t)
	agentBin := filepath.Join(filepath.Dir(c.bin), "vfleet-agent")
	state := testutil.HostState(t, agentBin)
	jsonPath := filepath.Join(c.work, "audit.json")
	stdout, stderr, code := c.run("audit", c.scenario(auditScenario), "--json", jsonPath, "--attack")
	testutil.CheckHostState(t, state, agentBin)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "isolation audit") || !strings.Contains(stdout, "reachability") {
		t.Errorf("audit output lacks its tables:\n%s", stdout)
	}
	groups := map[string]audit.Group{}
	for _, g := range readAudit(t, jsonPath).Groups {
		groups[g.Group] = g
	}
	value := func(group, property string) string {
		for _, f := range groups[group].Findings {
			if f.Property == property {
				return f.Value
			}
		}
		t.Errorf("group %s has no %s: %+v", group, property, groups[group])
		return ""
	}
	for _, want := range []struct{ group, property, prefix string }{
		{"default", "seccomp", "filter"},
		{"default", "keyctl", "blocked"},
		{"default", "no_new_privs", "set"},
		{"unconfined", "seccomp", "none"},
		{"unconfined", "keyctl", "allowed"},
		{"privileged", "kernel modules loadable", "yes"},
		{"userns", "user namespace", "root is host ID 1073741824"},
		{"host", "host processes visible", "all"},
		{"vm", "kernel", "its own"},
	} {
		if got := value(want.group, want.property); !strings.HasPrefix(got, want.prefix) {
			t.Errorf("%s %s = %q, want %s…", want.group, want.property, got, want.prefix)
		}
	}
	if groups["default"].Security != "default" || groups["vm"].Security != "sandbox" {
		t.Errorf("profiles recorded: default %q, vm %q", groups["default"].Security, groups["vm"].Security)
	}
	reach := func(group, target string, want bool) {
		r, ok := groups[group].Reach[target]
		if !ok || (r.Reached == r.Tried) != want || (r.Reached > 0 && r.Reached < r.Tried) {
			t.Errorf("%s reaching %s = %+v, want reached %v", group, target, r, want)
		}
	}
	reach("default", "peer", true)
	reach("default", "default-1", true)
	reach("default", "root namespace", false)
	reach("default", "macvlan", false)
	reach("vm", "peer", true)
	reach("vm", "root namespace", false)
	reach("macvlan", "peer", true)
	reach("macvlan", "host side", false)

	if !strings.Contains(stdout, "escape attempts") {
		t.Errorf("audit output lacks the escape attempts:\n%s", stdout)
	}
	verdict := func(group, attempt string) audit.EscapeVerdict {
		for _, e := range groups[group].Attacks {
			if e.Attempt == attempt {
				return e.Verdict
			}
		}
		t.Errorf("group %s made no %q attempt: %+v", group, attempt, groups[group].Attacks)
		return ""
	}
	for _, want := range []struct {
		group, attempt string
		verdict        audit.EscapeVerdict
	}{
		{"default", attack.CorePattern, audit.EscapeBlocked},
		{"default", attack.ReleaseAgent, audit.EscapeBlocked},
		{"default", attack.Module, audit.EscapeBlocked},
		{"default", attack.Shocker, audit.EscapeBlocked},
		{"privileged", attack.CorePattern, audit.Escaped},
		{"userns", attack.CorePattern, audit.EscapeBlocked},
		{"host", attack.CorePattern, audit.Escaped},
	} {
		if got := verdict(want.group, want.attempt); got != want.verdict {
			t.Errorf("%s %s: %s, want %s", want.group, want.attempt, got, want.verdict)
		}
	}
	if n := groups["vm"].Escaped; n != 0 || len(groups["vm"].Attacks) == 0 {
		t.Errorf("the VM's attempts: %d escaped of %+v, want none escaped", n, groups["vm"].Attacks)
	}
	if groups["privileged"].Escaped <= groups["default"].Escaped {
		t.Errorf("escapes: privileged %d, default %d; want the privileged container's more", groups["privileged"].Escaped, groups["default"].Escaped)
	}

	stdout, _, code = c.run("report", "latest", "--format", "json")
	var rep struct {
		Run struct {
			Guests map[string]struct{ Details map[string]string }
		}
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 0 {
		t.Fatalf("report json: %v (exit %d)", err, code)
	}
	if d := rep.Run.Guests["vm"].Details; !strings.Contains(d["qemu_sandbox"], "elevateprivileges=deny") || d["qemu_user"] == "" {
		t.Errorf("the sandboxed VM's record = %v", d)
	}
	if d := rep.Run.Guests["default-0"].Details; !strings.HasPrefix(d["seccomp"], "containerd default profile") || d["no_new_privileges"] != "true" {
		t.Errorf("the default container's record = %v", d)
	}
}

// readAudit reads the audit `vfleet audit --json` wrote to path.
func readAudit(t *testing.T, path string) audit.Report {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Audit audit.Report }
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out.Audit
}

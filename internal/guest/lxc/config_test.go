package lxc

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/guest"
)

func baseOptions() ConfigOptions {
	return ConfigOptions{
		Name: "lxc-0", RootFS: "/state/lxc-0/rootfs", Init: []string{"/usr/local/bin/vfleet-agent", "--listen", guest.AgentSocket},
		Env: []string{"PATH=/usr/bin:/bin"}, SockDir: "/state/lxc-0/sock",
		Cgroup: "/vfleet/r1/lxc-0", Monitor: "/vfleet/r1/lxc-0.monitor", Security: guest.SecurityDefault,
	}
}

// lines parses a configuration into its key = value lines, in order.
func lines(t *testing.T, o ConfigOptions) []string {
	t.Helper()
	c, err := Config(o)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(c), "\n")
}

func has(ls []string, line string) bool { return slices.Contains(ls, line) }

func TestConfigPutsTheContainerInTheGuestsCgroups(t *testing.T) {
	ls := lines(t, baseOptions())
	for _, want := range []string{
		"lxc.cgroup.dir.container = vfleet/r1/lxc-0",
		"lxc.cgroup.dir.monitor = vfleet/r1/lxc-0.monitor",
		"lxc.cgroup.dir.monitor.pivot = vfleet/r1/lxc-0",
		"lxc.init.cmd = /usr/local/bin/vfleet-agent --listen " + guest.AgentSocket,
		"lxc.mount.entry = /state/lxc-0/sock run/vfleet none bind,create=dir 0 0",
		"lxc.environment = PATH=/usr/bin:/bin",
		"lxc.uts.name = lxc-0",
	} {
		if !has(ls, want) {
			t.Errorf("config lacks %q:\n%s", want, strings.Join(ls, "\n"))
		}
	}
	if got := PivotOf("/vfleet/r1/lxc-0"); got != "/vfleet/r1/lxc-0/lxc.pivot" {
		t.Errorf("PivotOf = %q", got)
	}
}

func TestConfigJoinsTheRunsNamespaceOrHasLoopbackOnly(t *testing.T) {
	ls := lines(t, baseOptions())
	if !has(ls, "lxc.net.0.type = empty") || slices.ContainsFunc(ls, func(l string) bool { return strings.HasPrefix(l, "lxc.namespace.share.net") }) {
		t.Errorf("a guest without a network has more than loopback:\n%s", strings.Join(ls, "\n"))
	}
	o := baseOptions()
	o.NetNS = "/run/netns/vfleet-r1-lxc-0"
	ls = lines(t, o)
	if !has(ls, "lxc.namespace.share.net = /run/netns/vfleet-r1-lxc-0") || slices.ContainsFunc(ls, func(l string) bool { return strings.HasPrefix(l, "lxc.net.") }) {
		t.Errorf("a guest on a network must join its namespace and have no LXC network of its own:\n%s", strings.Join(ls, "\n"))
	}
}

// On a hybrid host a controller's limit goes under the key of the
// hierarchy that holds it; LXC ignores the other's.
func TestConfigLimitsFollowTheirControllersHierarchy(t *testing.T) {
	o := baseOptions()
	o.CPUs, o.MemoryBytes, o.CPULimit = "0-1", 512<<20, 0.5
	o.V1 = map[string]bool{"cpuset": true, "memory": true, "cpu": true}
	ls := lines(t, o)
	for _, want := range []string{"lxc.cgroup.cpuset.cpus = 0-1", "lxc.cgroup.memory.limit_in_bytes = 536870912",
		"lxc.cgroup.cpu.cfs_period_us = 100000", "lxc.cgroup.cpu.cfs_quota_us = 50000"} {
		if !has(ls, want) {
			t.Errorf("v1 config lacks %q:\n%s", want, strings.Join(ls, "\n"))
		}
	}
	o.V1 = nil
	ls = lines(t, o)
	for _, want := range []string{"lxc.cgroup2.cpuset.cpus = 0-1", "lxc.cgroup2.memory.max = 536870912", "lxc.cgroup2.cpu.max = 50000 100000"} {
		if !has(ls, want) {
			t.Errorf("v2 config lacks %q:\n%s", want, strings.Join(ls, "\n"))
		}
	}
}

func TestConfigOfEachProfile(t *testing.T) {
	for _, tc := range []struct {
		security     string
		netns        string
		want, absent []string
	}{
		{security: guest.SecurityDefault,
			want:   []string{"lxc.include = " + commonConf, "lxc.apparmor.profile = unconfined"},
			absent: []string{"lxc.seccomp.profile = ", "lxc.cap.drop = "}},
		{security: guest.SecurityUnconfined,
			want:   []string{"lxc.include = " + commonConf, "lxc.seccomp.profile = ", "lxc.apparmor.profile = unconfined"},
			absent: []string{"lxc.cap.drop = "}},
		{security: guest.SecurityPrivileged,
			want: []string{"lxc.seccomp.profile = ", "lxc.cap.drop = ", "lxc.cgroup.devices.allow = a",
				"lxc.mount.auto = cgroup:rw proc:rw sys:rw", "lxc.mount.entry = /dev dev none rbind,create=dir 0 0"}},
		{security: guest.SecurityUserNS,
			want:   []string{"lxc.include = " + usernsConf, "lxc.idmap = u 0 1073741824 65536", "lxc.idmap = g 0 1073741824 65536"},
			absent: []string{"lxc.seccomp.profile = ", "lxc.mount.entry = /sys sys none rbind,ro,create=dir 0 0"}},
		{security: guest.SecurityUserNS, netns: "/run/netns/x",
			want: []string{"lxc.mount.auto = cgroup:mixed proc:mixed", "lxc.mount.entry = /sys sys none rbind,ro,create=dir 0 0"}},
	} {
		o := baseOptions()
		o.Security, o.NetNS = tc.security, tc.netns
		ls := lines(t, o)
		for _, w := range tc.want {
			if !has(ls, w) {
				t.Errorf("%s (netns %q): config lacks %q:\n%s", tc.security, tc.netns, w, strings.Join(ls, "\n"))
			}
		}
		for _, a := range tc.absent {
			if has(ls, a) {
				t.Errorf("%s: config has %q", tc.security, a)
			}
		}
	}
}

// Where the host enables AppArmor, the confining profiles keep the one
// LXC generates; the others are unconfined.
func TestConfigAppArmorWhereTheHostHasIt(t *testing.T) {
	for security, unconfined := range map[string]bool{guest.SecurityDefault: false, guest.SecurityUserNS: false,
		guest.SecurityUnconfined: true, guest.SecurityPrivileged: true} {
		o := baseOptions()
		o.Security, o.AppArmor = security, true
		if got := has(lines(t, o), "lxc.apparmor.profile = unconfined"); got != unconfined {
			t.Errorf("%s on an AppArmor host: unconfined %v, want %v", security, got, unconfined)
		}
	}
}

// A state directory with a blank in its path stays one field of the
// mount entry.
func TestConfigEscapesBlanksInMountEntries(t *testing.T) {
	o := baseOptions()
	o.SockDir = "/var/lib/my vfleet/lxc-0/sock"
	if ls := lines(t, o); !has(ls, `lxc.mount.entry = /var/lib/my\040vfleet/lxc-0/sock run/vfleet none bind,create=dir 0 0`) {
		t.Errorf("the socket directory's mount entry:\n%s", strings.Join(ls, "\n"))
	}
}

func TestConfigRefusesALineBreakInAValue(t *testing.T) {
	o := baseOptions()
	o.Env = append(o.Env, "EVIL=x\nlxc.cap.drop =")
	if _, err := Config(o); !errors.Is(err, errNewline) {
		t.Errorf("an environment value with a line break: %v, want errNewline", err)
	}
}

func TestV1ControllersOfAHybridHost(t *testing.T) {
	got, err := V1Controllers(filepath.Join("testdata", "proc"))
	if err != nil {
		t.Fatal(err)
	}
	for c, want := range map[string]bool{"cpuset": true, "cpu": true, "memory": true, "hugetlb": false, "net_cls": false, "pids": false} {
		if got[c] != want {
			t.Errorf("%s on v1: %v, want %v", c, got[c], want)
		}
	}
}

func TestNewRefusesWhatLXCGuestsDoNotTake(t *testing.T) {
	for what, spec := range map[string]guest.Spec{
		"a runtime":           {Runtime: "runc"},
		"rt_priority":         {RTPriority: 50},
		"too little memory":   {MemoryBytes: 1 << 20},
		"a profile it lacks":  {Security: guest.SecuritySandbox},
		"an unknown profile":  {Security: "weird"},
		"a tap instead of ns": {Tap: &guest.TapConfig{Name: "t0"}},
	} {
		spec.Name, spec.Kind = "lxc-0", KindName
		if _, err := (kind{}).New(spec, guest.Env{}); err == nil {
			t.Errorf("%s was accepted", what)
		}
	}
	if _, err := (kind{}).New(guest.Spec{Name: "lxc-0", Kind: KindName, MemoryBytes: MinMemory}, guest.Env{}); err != nil {
		t.Errorf("the least memory: %v", err)
	}
}

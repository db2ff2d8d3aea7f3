package container

import (
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/vfleet/vfleet/internal/guest"
)

func TestSecurityProfilesConfineAsEnginesDo(t *testing.T) {
	def := mustBundle(t, BundleOptions{Security: guest.SecurityDefault})
	if def.Linux.Seccomp == nil || def.Linux.Seccomp.DefaultAction != specs.ActErrno || !def.Process.NoNewPrivileges {
		t.Errorf("default: seccomp %+v, no_new_privs %v; want containerd's filter and no new privileges", def.Linux.Seccomp, def.Process.NoNewPrivileges)
	}
	if allows(def.Linux.Seccomp, "keyctl") || !allows(def.Linux.Seccomp, "read") {
		t.Error("default filter: want read allowed and keyctl refused")
	}
	if !slices.Equal(def.Process.Capabilities.Effective, defaultCaps) || len(def.Linux.MaskedPaths) == 0 {
		t.Errorf("default: caps %v, masked %v", def.Process.Capabilities.Effective, def.Linux.MaskedPaths)
	}

	unconfined := mustBundle(t, BundleOptions{Security: guest.SecurityUnconfined})
	if unconfined.Linux.Seccomp != nil || unconfined.Process.NoNewPrivileges || len(unconfined.Linux.MaskedPaths) == 0 {
		t.Errorf("unconfined: seccomp %+v, no_new_privs %v, masked %v; want no filter, masked paths kept", unconfined.Linux.Seccomp, unconfined.Process.NoNewPrivileges, unconfined.Linux.MaskedPaths)
	}

	// A real-time container's filter lets it use what CAP_SYS_NICE grants.
	rt := mustBundle(t, BundleOptions{Security: guest.SecurityDefault, RTPriority: 50})
	if !allows(rt.Linux.Seccomp, "sched_setscheduler") {
		t.Error("default filter of a real-time container refuses sched_setscheduler")
	}

	priv := mustBundle(t, BundleOptions{Security: guest.SecurityPrivileged})
	if priv.Linux.Seccomp != nil || len(priv.Linux.MaskedPaths) != 0 || len(priv.Linux.ReadonlyPaths) != 0 ||
		!slices.Contains(priv.Process.Capabilities.Effective, "CAP_SYS_ADMIN") || len(priv.Linux.Devices) == 0 {
		t.Errorf("privileged: seccomp %v, masked %v, readonly %v, caps %v, %d devices", priv.Linux.Seccomp, priv.Linux.MaskedPaths,
			priv.Linux.ReadonlyPaths, priv.Process.Capabilities.Effective, len(priv.Linux.Devices))
	}
	for _, m := range priv.Mounts {
		if (m.Type == "sysfs" || m.Type == "cgroup") && slices.Contains(m.Options, "ro") {
			t.Errorf("privileged: %s mounted read-only", m.Destination)
		}
	}

	userns := mustBundle(t, BundleOptions{Security: guest.SecurityUserNS})
	want := []specs.LinuxIDMapping{{ContainerID: 0, HostID: guest.UserNSHostID, Size: guest.UserNSSize}}
	if !slices.Equal(userns.Linux.UIDMappings, want) || !slices.Equal(userns.Linux.GIDMappings, want) || userns.Linux.Seccomp == nil ||
		!slices.ContainsFunc(userns.Linux.Namespaces, func(n specs.LinuxNamespace) bool { return n.Type == specs.UserNamespace }) {
		t.Errorf("userns: uid map %v, gid map %v, namespaces %v, seccomp %v", userns.Linux.UIDMappings, userns.Linux.GIDMappings, userns.Linux.Namespaces, userns.Linux.Seccomp != nil)
	}

	for _, m := range userns.Mounts {
		if m.Destination == "/sys" && m.Type != "sysfs" {
			t.Errorf("userns without a joined network namespace: /sys is %+v, want its own sysfs", m)
		}
	}
	joined := mustBundle(t, BundleOptions{Security: guest.SecurityUserNS, NetNS: "/run/netns/x"})
	for _, m := range joined.Mounts {
		if m.Destination == "/sys" && (m.Type != "bind" || !slices.Contains(m.Options, "ro")) {
			t.Errorf("userns in a joined network namespace: /sys is %+v, want a read-only bind", m)
		}
	}

	if _, err := Bundle(BundleOptions{Security: guest.SecuritySandbox}); err == nil {
		t.Error("a VM's profile was taken for a container")
	}
}

// allows says whether the filter lets the system call through.
func allows(f *specs.LinuxSeccomp, syscall string) bool {
	for _, rule := range f.Syscalls {
		if rule.Action == specs.ActAllow && len(rule.Args) == 0 && slices.Contains(rule.Names, syscall) {
			return true
		}
	}
	return false
}

func TestContainersDefaultToTheDeployedProfile(t *testing.T) {
	for _, c := range []struct{ security, want, err string }{
		{"", guest.SecurityDefault, ""},
		{guest.SecurityUserNS, guest.SecurityUserNS, ""},
		{guest.SecuritySandbox, "", `security "sandbox" does not apply to kind container (allowed: default, unconfined, privileged, userns)`},
	} {
		got, err := guest.SecurityOf(guest.Spec{Kind: KindName, Security: c.security})
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) {
			t.Errorf("security %q: got %q, %v; want %q, %s", c.security, got, err, c.want, c.err)
		}
	}
	if _, err := (kind{}).New(guest.Spec{Name: "c", Kind: KindName, Security: guest.SecurityUserNS, RTPriority: 10}, guest.Env{}); err == nil {
		t.Error("userns with rt_priority was accepted")
	}
}

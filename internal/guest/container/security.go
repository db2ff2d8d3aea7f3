package container

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/containerd/containerd/v2/contrib/apparmor"
	"github.com/containerd/containerd/v2/contrib/seccomp"
	"github.com/containerd/containerd/v2/core/containers"
	hostapparmor "github.com/containerd/containerd/v2/pkg/apparmor"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/vfleet/vfleet/internal/guest"
)

// containerSecurity are the profiles a container takes, the default first:
// the default is what container engines deploy, so that the measured
// overhead includes the seccomp filter every deployed container pays.
var containerSecurity = []string{guest.SecurityDefault, guest.SecurityUnconfined, guest.SecurityPrivileged, guest.SecurityUserNS}

// appArmorProfile is the name vfleet loads containerd's default AppArmor
// profile under, on hosts that enable AppArmor.
const appArmorProfile = "vfleet-default"

// applySecurity confines the bundle as the profile says, with containerd's
// own spec options and default seccomp profile, so the filter and the
// privileged set follow what containerd deploys rather than a copy of it.
// It runs after the capabilities are final: the seccomp profile allows
// some system calls only to holders of the capability they need.
// Privileged reads the host's capabilities and devices.
func applySecurity(s *specs.Spec, o BundleOptions) error {
	ctx := context.Background()
	var opts []oci.SpecOpts
	switch o.Security {
	case guest.SecurityDefault, guest.SecurityUserNS:
		opts = append(opts, oci.WithNoNewPrivileges, seccomp.WithDefaultProfile())
		if o.AppArmorProfile != "" {
			opts = append(opts, oci.WithApparmorProfile(o.AppArmorProfile))
		}
	case guest.SecurityPrivileged:
		opts = append(opts, oci.WithPrivileged, oci.WithHostDevices, oci.WithAllDevicesAllowed)
	case guest.SecurityUnconfined, "":
	default:
		return fmt.Errorf("unknown security profile %q", o.Security)
	}
	if o.Security == guest.SecurityUserNS {
		ids := []specs.LinuxIDMapping{{ContainerID: 0, HostID: guest.UserNSHostID, Size: guest.UserNSSize}}
		opts = append(opts, oci.WithUserNamespace(ids, ids))
		if o.NetNS != "" {
			opts = append(opts, bindSysfs)
		}
	}
	return oci.ApplyOpts(ctx, nil, nil, s, opts...)
}

// bindSysfs replaces the container's sysfs with a read-only bind of the
// host's: a user namespace may mount sysfs only over a network namespace
// it owns, and a container on a run's network joins one that vfleet made
// (as container engines do for a user-namespaced container in another's
// network namespace). Its /sys/class/net then lists the host's devices.
func bindSysfs(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
	for i, m := range s.Mounts {
		if m.Type == "sysfs" {
			s.Mounts[i] = specs.Mount{Destination: m.Destination, Type: "bind", Source: "/sys",
				Options: []string{"rbind", "nosuid", "noexec", "nodev", "ro"}}
		}
	}
	return nil
}

// hostAppArmor loads containerd's default AppArmor profile where the host
// enables AppArmor, and says what was applied for the guest's record.
func hostAppArmor(security string) (profile, record string, err error) {
	if security != guest.SecurityDefault && security != guest.SecurityUserNS {
		return "", "unconfined", nil
	}
	if !hostapparmor.HostSupports() {
		return "", "not enabled on this host", nil
	}
	if err := apparmor.LoadDefaultProfile(appArmorProfile); err != nil {
		return "", "", fmt.Errorf("load the default AppArmor profile: %w", err)
	}
	return appArmorProfile, appArmorProfile, nil
}

// seccompRecord describes a bundle's seccomp filter for the guest's record.
func seccompRecord(f *specs.LinuxSeccomp) string {
	if f == nil {
		return "none"
	}
	return fmt.Sprintf("containerd default profile (default action %s, %d rules)", f.DefaultAction, len(f.Syscalls))
}

// openToUserNS lets a container whose root is an unprivileged host user
// (security: userns) reach its root file system and serve its agent's
// socket. The directories above its root become searchable by others;
// the mount points of its binds are made beforehand, since its root may
// not create them in the image's directories; and the socket and scratch
// directories belong to the container's root. The image's own files stay
// the host root's, so in the container they belong to nobody and only
// what the image lets everyone write is writable.
func openToUserNS(merged, stateRoot string, binds []Bind) error {
	if err := guest.Searchable(merged, []string{stateRoot}, guest.UserNSHostID); err != nil {
		return fmt.Errorf("security userns: %w", err)
	}
	owned := []string{filepath.Join(merged, guest.ScratchDir)}
	for _, b := range binds {
		target := filepath.Join(merged, b.Destination)
		st, err := os.Stat(b.Source)
		if err != nil {
			return err
		}
		if st.IsDir() {
			err = os.MkdirAll(target, 0o755)
			owned = append(owned, b.Source)
		} else if err = os.MkdirAll(filepath.Dir(target), 0o755); err == nil {
			var f *os.File
			if f, err = os.OpenFile(target, os.O_CREATE|os.O_RDONLY, 0o644); err == nil {
				err = f.Close()
			}
		}
		if err != nil {
			return fmt.Errorf("security userns: mount point %s: %w", b.Destination, err)
		}
	}
	for _, dir := range owned {
		if err := os.Chown(dir, guest.UserNSHostID, guest.UserNSHostID); err != nil {
			return fmt.Errorf("give %s to the container's root: %w", dir, err)
		}
	}
	return nil
}

package guest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Security profiles a guest runs under (Spec.Security). Which a kind takes
// is its Traits.Security.
const (
	// SecurityDefault is what container engines apply to every container
	// they start: their default seccomp filter, capability set, masked and
	// read-only paths, no new privileges, and AppArmor's default profile
	// where the host enables AppArmor.
	SecurityDefault = "default"
	// SecurityUnconfined is no seccomp filter or LSM profile; a container
	// keeps the default capabilities and masked paths.
	SecurityUnconfined = "unconfined"
	// SecurityPrivileged is a container given every capability, every
	// host device and writable /sys and cgroups, as `--privileged` does.
	SecurityPrivileged = "privileged"
	// SecurityUserNS is SecurityDefault in a user namespace that maps the
	// container's root to an unprivileged range of host IDs.
	SecurityUserNS = "userns"
	// SecuritySandbox confines a VM's QEMU: its own seccomp filter (QEMU's
	// -sandbox) and an unprivileged host user.
	SecuritySandbox = "sandbox"
)

// SecurityProfiles are every profile name a scenario may give.
var SecurityProfiles = []string{SecurityDefault, SecurityUnconfined, SecurityPrivileged, SecurityUserNS, SecuritySandbox}

// Unprivileged host IDs guests run as. They lie far above the ranges
// distributions hand to users and to rootless engines' subordinate IDs,
// so no one else's files or processes share them.
const (
	// UserNSHostID is the host ID a user namespace maps the container's
	// root (ID 0) to; the namespace maps UserNSSize IDs from there.
	UserNSHostID = 1 << 30
	UserNSSize   = 1 << 16
	// SandboxHostID is the user and group a sandboxed VM's QEMU runs as.
	SandboxHostID = UserNSHostID + UserNSSize
)

// SecurityOf is the profile a guest of the spec's kind runs under: the
// spec's, or the kind's default when it names none. A profile the kind
// does not take is refused, naming those it does.
func SecurityOf(spec Spec) (string, error) {
	allowed := TraitsOf(spec).Security
	if len(allowed) == 0 {
		allowed = []string{SecurityUnconfined}
	}
	if spec.Security == "" {
		return allowed[0], nil
	}
	if !slices.Contains(allowed, spec.Security) {
		return "", fmt.Errorf("security %q does not apply to kind %s (allowed: %s)", spec.Security, spec.Kind, strings.Join(allowed, ", "))
	}
	return spec.Security, nil
}

// Searchable makes dir and its ancestors searchable by others, so that a
// guest's process running as the unprivileged host user uid reaches what
// vfleet gave it. Only directories under one of roots (vfleet's own state
// and images) are changed, and only to searchable, never listable; any
// other directory others cannot search is refused, naming it.
func Searchable(dir string, roots []string, uid int) error {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o001 == 0 {
			if !slices.ContainsFunc(roots, func(root string) bool { return within(d, root) }) {
				return fmt.Errorf("user %d, which the guest runs as, cannot reach into %s (mode %v): make it searchable by others", uid, d, st.Mode().Perm())
			}
			if err := os.Chmod(d, st.Mode().Perm()|0o001); err != nil {
				return err
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

func within(p, root string) bool {
	return root != "" && (p == root || strings.HasPrefix(p, root+string(filepath.Separator)))
}

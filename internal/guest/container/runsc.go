package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/vfleet/vfleet/internal/guest"
)

// runscRuntime is gVisor's runtime: the container's processes run on
// gVisor's application kernel (the sentry), a host process that serves
// their system calls, with file access through a second one (the gofer).
const runscRuntime = "runsc"

// runscSecurity are the profiles a container takes under runsc, the
// default first: default is the bundle engines deploy, whose seccomp
// filter runsc, like Docker's runsc, leaves unapplied (see
// runscCreateFlags); unconfined is the bundle without it. Either way the
// sandbox confines itself on the host with its own filter.
var runscSecurity = []string{guest.SecurityDefault, guest.SecurityUnconfined}

// runscRefusal says why runsc refuses the other profiles.
var runscRefusal = map[string]string{
	guest.SecurityPrivileged: "privileged means the host's devices and every capability over the host's kernel; " +
		"under runsc capabilities act on gVisor's application kernel only and the host's devices are not passed in",
	guest.SecurityUserNS: "userns maps the container's root to an unprivileged host user; runsc runs the container's " +
		"processes on gVisor's kernel, inside a sandbox that already drops its host privileges, and does not map them so",
}

// runscNetwork is how a runsc container reaches its network namespace.
// gVisor's own network stack (netstack, --network=sandbox) takes over the
// namespace's interfaces only outside the host's root namespace, which
// this version (Debian's 0.0~20221219) tells by the absence of
// /proc/sys/net/core/rmem_default: since Linux 6.7 that file exists in
// every namespace, so netstack refuses every namespace as the root one
// (gVisor issue 10704, fixed upstream in August 2024). With
// --network=host the sandbox joins the namespace the spec names and its
// sockets are the host kernel's, in that namespace: the guest's own eth0
// on its data path, on every path.
const runscNetwork = "host"

// runscPlatforms are the platforms tried, fastest first: kvm where it
// really runs a sandbox (a /dev/kvm that opens can still hang one, as
// it does on this kind of nested host), systrap where the version has it
// (2023 and later), and ptrace, which every version has.
var runscPlatforms = []string{"kvm", "systrap", "ptrace"}

// kvmProbeTimeout bounds the kvm platform's trial: a sandbox that hangs
// on it runs nothing within it and is killed with its cgroup.
const kvmProbeTimeout = 5 * time.Second

// runscCreateFlags are the global flags that make a runsc container: its
// platform, its network, and its agent's socket, bound in the sandbox
// and served on the host (--host-uds=create), as runc's is. The
// container's seccomp filter is not applied inside the sandbox
// (--oci-seccomp, off by default, as Docker runs runsc): this version,
// given containerd's default profile, refuses every new thread (EPERM).
func runscCreateFlags(platform string, joinsNetNS bool) []string {
	network := runscNetwork
	if !joinsNetNS {
		// A guest on no network still has a loopback, as under runc:
		// with none gVisor's own stack serves it, where the host's would
		// leave the new namespace's lo down.
		network = "none"
	}
	return []string{"--platform", platform, "--network", network, "--host-uds", "create"}
}

// platformCache holds each runsc binary's platform, chosen once per
// process: a choice costs a probe container per platform tried.
var platformCache struct {
	sync.Mutex
	chosen map[string]string
}

// runscPlatform is the platform runsc containers of bin run on, chosen
// once per process. An interrupted choice is not remembered.
func runscPlatform(ctx context.Context, bin string) (string, error) {
	platformCache.Lock()
	defer platformCache.Unlock()
	if p, ok := platformCache.chosen[bin]; ok {
		return p, nil
	}
	p, err := choosePlatform(ctx, kvmOpens(), func(ctx context.Context, platform string) ([]byte, error) {
		return probeRun(ctx, bin, "--platform", platform, "--network", runscNetwork)
	})
	if err != nil {
		return "", err
	}
	if platformCache.chosen == nil {
		platformCache.chosen = map[string]string{}
	}
	platformCache.chosen[bin] = p
	return p, nil
}

// choosePlatform is the first of runscPlatforms on which try runs a probe
// container, each trial bounded; kvm is tried only where /dev/kvm opens.
func choosePlatform(ctx context.Context, kvm bool, try func(context.Context, string) ([]byte, error)) (string, error) {
	var tried []string
	for _, p := range runscPlatforms {
		if p == "kvm" && !kvm {
			tried = append(tried, "kvm: /dev/kvm does not open")
			continue
		}
		timeout := probeTimeout
		if p == "kvm" {
			timeout = kvmProbeTimeout
		}
		pctx, cancel := context.WithTimeout(ctx, timeout)
		out, err := try(pctx, p)
		cancel()
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if err == nil {
			return p, nil
		}
		tried = append(tried, fmt.Sprintf("%s: %v: %s", p, err, guest.Tail(out, 200)))
	}
	return "", fmt.Errorf("%w: runsc runs a container on none of its platforms (%s)", guest.ErrNotSupported, strings.Join(tried, "; "))
}

func kvmOpens() bool {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return false
	}
	return f.Close() == nil
}

// errRunscSecurity is a security profile runsc cannot give its meaning.
var errRunscSecurity = errors.New("security profile not available under runsc")

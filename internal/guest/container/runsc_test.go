package container

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/guest"
)

// Under runsc a profile whose meaning gVisor cannot give is refused when
// the guest is made, naming the sentinel; the others are taken.
func TestRunscRefusesProfilesItCannotMean(t *testing.T) {
	k, err := guest.Lookup(KindName)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range guest.SecurityProfiles {
		if !slices.Contains(containerSecurity, p) {
			continue
		}
		_, err := k.New(guest.Spec{Name: "c", Kind: KindName, Runtime: runscRuntime, Security: p}, guest.Env{})
		taken := slices.Contains(k.(guest.Runtimed).RuntimeTraits(runscRuntime).Security, p)
		switch {
		case taken && err != nil:
			t.Errorf("security %s under runsc: %v", p, err)
		case !taken && !errors.Is(err, errRunscSecurity):
			t.Errorf("security %s under runsc: %v, want errRunscSecurity", p, err)
		}
		if _, err := k.New(guest.Spec{Name: "c", Kind: KindName, Security: p}, guest.Env{}); err != nil {
			t.Errorf("security %s under runc: %v", p, err)
		}
	}
	if got := k.(guest.Runtimed).RuntimeTraits(runscRuntime).Security; !slices.Equal(got, []string{guest.SecurityDefault, guest.SecurityUnconfined}) {
		t.Errorf("runsc profiles = %v", got)
	}
}

// What vfleet asks of a runsc container outside the kind is runsc's
// traits, not runc's: the profiles it takes, its agent in the sandbox.
func TestRunscGuestsAreAskedRunscsTraits(t *testing.T) {
	spec := guest.Spec{Kind: KindName, Runtime: runscRuntime, Security: guest.SecurityPrivileged}
	if p, err := guest.SecurityOf(spec); err == nil {
		t.Errorf("security of a privileged runsc container = %s: runsc takes no such profile", p)
	}
	spec.Security = ""
	if p, err := guest.SecurityOf(spec); p != guest.SecurityDefault || err != nil {
		t.Errorf("default security under runsc = %s, %v", p, err)
	}
	if tr := guest.TraitsOf(spec); !tr.AgentInGuest || tr.OwnKernel || tr.BootsDisk {
		t.Errorf("traits of a runsc container = %+v: want its agent in the sandbox's memory, on no kernel of its own, from an OCI image", tr)
	}
	if tr := guest.TraitsOf(guest.Spec{Kind: KindName}); tr.AgentInGuest {
		t.Errorf("traits of a container under the default runtime = %+v: runc's agent is a host process", tr)
	}
}

// The suite runs the kind's default runtime first, and under runc the
// kind's own traits.
func TestRuntimesDefaultFirst(t *testing.T) {
	r := kind{}
	if rts := r.Runtimes(); rts[0] != DefaultRuntime || !slices.Contains(rts, runscRuntime) {
		t.Errorf("runtimes = %v", rts)
	}
	if !slices.Equal(r.RuntimeTraits("runc").Security, containerSecurity) || r.RuntimeTraits("runc").AgentInGuest {
		t.Errorf("runc traits = %+v", r.RuntimeTraits("runc"))
	}
	if !r.RuntimeTraits(runscRuntime).AgentInGuest {
		t.Error("under runsc the agent runs on gVisor's kernel, not as a host process")
	}
}

// The agent's socket is served on the host, and the bundle's seccomp
// filter is not applied inside the sandbox, where it refuses threads.
func TestRunscCreateFlags(t *testing.T) {
	f := runscCreateFlags("ptrace", true)
	if slices.Contains(f, "--oci-seccomp") {
		t.Errorf("flags %v apply the bundle's seccomp filter inside the sandbox", f)
	}
	if i := slices.Index(f, "--host-uds"); i < 0 || f[i+1] != "create" {
		t.Errorf("flags %v do not serve the agent's socket on the host", f)
	}
	if i := slices.Index(f, "--platform"); i < 0 || f[i+1] != "ptrace" {
		t.Errorf("flags %v lack the platform", f)
	}
	if i := slices.Index(f, "--network"); i < 0 || f[i+1] != runscNetwork {
		t.Errorf("flags %v of a guest on a network do not use the host's stack in its namespace", f)
	}
	if f := runscCreateFlags("ptrace", false); !slices.Contains(f, "none") {
		t.Errorf("flags %v of a guest on no network: want gVisor's own loopback (--network none)", f)
	}
}

// The platform is the first that runs a sandbox: a kvm that hangs one is
// given up at its bound, a platform the version lacks is passed over.
func TestChoosePlatformTakesTheFirstThatRuns(t *testing.T) {
	var order []string
	try := func(ctx context.Context, p string) ([]byte, error) {
		order = append(order, p)
		switch p {
		case "kvm":
			// A sandbox that hangs: its trial must be bounded by kvm's
			// own bound.
			if d, ok := ctx.Deadline(); !ok || time.Until(d) > kvmProbeTimeout {
				t.Errorf("kvm's trial is not bounded by %s", kvmProbeTimeout)
			}
			return nil, context.DeadlineExceeded
		case "systrap":
			return []byte("invalid platform"), errors.New("exit status 128")
		}
		return nil, nil
	}
	got, err := choosePlatform(context.Background(), true, try)
	if err != nil || got != "ptrace" || !slices.Equal(order, []string{"kvm", "systrap", "ptrace"}) {
		t.Errorf("chose %q (%v) after trying %v", got, err, order)
	}
	order = nil
	if got, _ := choosePlatform(context.Background(), false, try); got != "ptrace" || slices.Contains(order, "kvm") {
		t.Errorf("without /dev/kvm: chose %q after trying %v", got, order)
	}
	none := func(context.Context, string) ([]byte, error) { return nil, errors.New("exit status 1") }
	if _, err := choosePlatform(context.Background(), false, none); !errors.Is(err, guest.ErrNotSupported) {
		t.Errorf("no platform runs: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := choosePlatform(ctx, false, none); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled choice: %v", err)
	}
}

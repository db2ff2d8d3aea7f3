package container

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/cgroup"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/guest/identity"
	"github.com/vfleet/vfleet/internal/guest/overlay"
)

// KindName is the name scenarios use.
const KindName = "container"

func init() { guest.Register(kind{}) }

type kind struct{}

func (kind) Name() string { return KindName }

// Traits: a container joins a namespace and is placed by cpusets, like
// the zero traits say; it takes the security profiles of containers, and
// real-time scheduling only when granted.
func (kind) Traits() guest.Traits {
	return guest.Traits{Security: containerSecurity, RealTimeOnRequest: true}
}

// Program: a container's runtime; its releases change how cgroups are
// set up.
func (kind) Program(spec guest.Spec) string { return cmp.Or(spec.Runtime, DefaultRuntime) }

// Fields: rt_priority grants the container's processes real-time
// scheduling up to that priority.
func (kind) Fields() []guest.Field {
	return []guest.Field{guest.IntField("rt_priority", func(s *guest.Spec) *int { return &s.RTPriority }, 1, 99)}
}

// Runtimes: the runtimes a container runs under, the default first.
func (kind) Runtimes() []string { return Runtimes() }

// RuntimeTraits: under runsc the agent runs on gVisor's application
// kernel, inside the sandbox's memory, and the container takes fewer
// profiles.
func (k kind) RuntimeTraits(runtime string) guest.Traits {
	t := k.Traits()
	if runtime == runscRuntime {
		t.AgentInGuest, t.Security = true, runscSecurity
	}
	return t
}

// ConformanceSpec: the suite's containers run within a CPU set and a
// memory limit, as a run's do.
func (kind) ConformanceSpec() guest.Spec {
	return guest.Spec{CPUs: "0", MemoryBytes: 512 << 20}
}

// MinMemory is the least memory limit a container starts with: runc's
// init, a Go program, and vfleet's agent are charged to it.
const MinMemory = 16 << 20

func (kind) New(spec guest.Spec, env guest.Env) (guest.Guest, error) {
	rt := kind{}.Program(spec)
	if !slices.Contains(Runtimes(), rt) {
		return nil, fmt.Errorf("guest %s: unknown container runtime %q (known: %s)", spec.Name, rt, strings.Join(Runtimes(), ", "))
	}
	if err := guest.CheckSpec(KindName, spec); err != nil {
		return nil, fmt.Errorf("guest %s: %v", spec.Name, err)
	}
	// A container's profile runsc cannot give is refused with why, before
	// SecurityOf refuses it as any profile the guest does not take.
	if rt == runscRuntime && runscRefusal[spec.Security] != "" {
		return nil, fmt.Errorf("guest %s: %w: security %s (runsc takes %s): %s", spec.Name, errRunscSecurity, spec.Security,
			strings.Join(runscSecurity, ", "), runscRefusal[spec.Security])
	}
	security, err := guest.SecurityOf(spec)
	if err != nil {
		return nil, fmt.Errorf("guest %s: %v", spec.Name, err)
	}
	if security == guest.SecurityUserNS && spec.RTPriority > 0 {
		return nil, fmt.Errorf("guest %s: rt_priority needs the host's CAP_SYS_NICE, which a container in a user namespace (security: userns) cannot hold; use security default", spec.Name)
	}
	if spec.MemoryBytes != 0 && spec.MemoryBytes < MinMemory {
		return nil, fmt.Errorf("guest %s: memory %d bytes is too little for a container: give at least %dMiB (the runtime's init and vfleet's agent run inside the limit)",
			spec.Name, spec.MemoryBytes, MinMemory>>20)
	}
	return &Guest{
		Base: guest.NewBase(spec), env: env, runtime: rt, security: security,
		id:  "vfleet-" + env.RunID + "-" + spec.Name,
		dir: filepath.Join(env.StateDir, spec.Name),
	}, nil
}

// Guest is one container.
type Guest struct {
	*guest.Base
	env      guest.Env
	runtime  string
	security string
	id       string
	dir      string
}

func (g *Guest) Start(ctx context.Context) error { return g.Launch(ctx, g.start) }

func (g *Guest) start(ctx context.Context, undo *guest.Teardown) (*agent.Client, guest.Info, error) {
	fail := func(err error) (*agent.Client, guest.Info, error) { return nil, guest.Info{}, err }
	bin, err := runtimeBinary(g.runtime)
	if err != nil {
		return fail(err)
	}
	led := g.env.Ledger

	sockDir := filepath.Join(g.dir, "sock")
	bundleDir := filepath.Join(g.dir, "bundle")
	if err := undo.MakeDir(led, g.dir, "sock", "bundle"); err != nil {
		return fail(err)
	}

	layer, err := overlay.Mount(led, g.env.RootFS, g.dir)
	if err != nil {
		return fail(err)
	}
	undo.Push(layer.Unmount)
	if err := os.MkdirAll(filepath.Join(layer.Merged, guest.ScratchDir), 0o1777); err != nil {
		return fail(err)
	}
	if err := identity.Write(layer.Merged, g.Spec().Name); err != nil {
		return fail(err)
	}

	if g.security == guest.SecurityUserNS {
		if err := openToUserNS(layer.Merged, filepath.Dir(filepath.Dir(g.env.StateDir)), g.binds(sockDir)); err != nil {
			return fail(err)
		}
	}
	appArmor, appArmorRecord, err := hostAppArmor(g.security)
	if err != nil {
		return fail(err)
	}
	// runsc keeps its containers' state in the guest's directory, where
	// the ledger's undo finds it after a crash.
	platform, stateRoot := "", ""
	if g.runtime == runscRuntime {
		// runsc does not apply the spec's AppArmor profile.
		appArmor, appArmorRecord = "", "not applied by runsc"
		if platform, err = runscPlatform(ctx, bin); err != nil {
			return fail(err)
		}
		stateRoot = filepath.Join(g.dir, "runsc")
	}

	cgroupsPath := cgroup.PathOf(g.env.RunID, g.Spec().Name)
	config, err := Bundle(BundleOptions{
		Hostname: g.Spec().Name, RootPath: layer.Merged,
		Args:        []string{g.env.AgentPath, "--listen", guest.AgentSocket, "--workdir", guest.ScratchDir},
		Env:         g.env.ProcessEnv(),
		CgroupsPath: cgroupsPath, CPUs: g.Spec().CPUs, MemoryBytes: g.Spec().MemoryBytes, CPULimit: g.Spec().CPULimit,
		NetNS: g.Spec().NetNS, RTPriority: g.Spec().RTPriority, RTRuntimeUS: g.rtRuntime(),
		Binds:    g.binds(sockDir),
		Security: g.security, AppArmorProfile: appArmor,
	})
	if err != nil {
		return fail(err)
	}
	b, err := json.MarshalIndent(config, "", "  ")
	if err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(bundleDir, "config.json"), b, 0o600); err != nil {
		return fail(err)
	}

	cgEntry, err := led.Record(cgroup.Kind, cgroupsPath, nil)
	if err != nil {
		return fail(err)
	}
	undo.PushRelease(led, cgEntry)
	global := rootFlags(stateRoot)
	if platform != "" {
		global = append(global, runscCreateFlags(platform, g.Spec().NetNS != "")...)
	}
	ctrData := map[string]string{"runtime": bin, "root": stateRoot}
	if g.runtime != runscRuntime {
		// runsc's sandbox is stopped by runsc, which keeps its own account
		// of it.
		ctrData["cgroup"] = cgroupsPath
	}
	ctrEntry, err := led.Record(kindContainer, g.id, ctrData)
	if err != nil {
		return fail(err)
	}
	undo.PushRelease(led, ctrEntry)

	if g.runtime == runscRuntime {
		if err := cgroup.FillCpusetParents(cgroup.CpusetV1Dir, cgroupsPath); err != nil {
			return fail(err)
		}
	}
	logPath, pidPath := filepath.Join(g.dir, "container.log"), filepath.Join(g.dir, "container.pid")
	if err := g.runWithBudget(ctx, cgroupsPath, func() error { return g.runDetached(ctx, bin, global, bundleDir, logPath, pidPath) }); err != nil {
		return fail(err)
	}
	pid, err := readPidFile(pidPath)
	if err != nil {
		return fail(err)
	}
	// The container holds its root in a mount namespace of its own now: the
	// host's view of the overlay (private, so taking it away does not reach
	// the container's) goes, so that the host's mount table does not grow
	// with the fleet. Every runtime's start and delete reads that table
	// whole, the kernel writing out each overlay's options: with the
	// fleet's overlays in it, a thousand containers spent more CPU there
	// than in anything else but runc itself. runsc's gofer serves the root
	// through the host's view (without it, listing a directory in the
	// guest failed with EINVAL), so its overlay stays.
	if g.runtime != runscRuntime {
		if err := layer.Unmount(); err != nil {
			return fail(err)
		}
	}

	readyCtx, cancel := context.WithTimeout(ctx, guest.ReadyTimeout)
	defer cancel()
	agentAddr := filepath.Join(sockDir, filepath.Base(guest.AgentSocket))
	client, err := agent.WaitReady(readyCtx, agentAddr)
	if err != nil {
		log, _ := os.ReadFile(logPath)
		return fail(fmt.Errorf("%w; container log: %s", err, guest.Tail(log, 500)))
	}
	return client, guest.Info{
		Kind: KindName, Runtime: g.runtime, PIDs: []int{pid},
		Cgroup: cgroupsPath, ScratchDir: guest.ScratchDir, AgentAddr: agentAddr,
		Details: g.details(bin, config, appArmorRecord, platform),
	}, nil
}

// binds are the container's bind mounts: the agent's socket directory,
// and the agent itself, read-only, in an image that lacks it.
func (g *Guest) binds(sockDir string) []Bind {
	b := []Bind{{Source: sockDir, Destination: guest.AgentSocketDir}}
	if g.env.AgentBinary != "" {
		b = append(b, Bind{Source: g.env.AgentBinary, Destination: g.env.AgentPath, ReadOnly: true})
	}
	return b
}

// runDetached starts the container in the background; its stdio goes to a
// log file, so nothing ties its life to vfleet's. The runtime writes the
// container's init pid to pidPath: reading it there spares running the
// runtime's binary a second time (`state`), which cost more CPU than
// anything else in a start but `run` itself.
func (g *Guest) runDetached(ctx context.Context, bin string, global []string, bundleDir, logPath, pidPath string) error {
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	// A start cancelled while the runtime runs waits for it: killed
	// midway, the processes it forked go on without it (crun's create
	// the container's cgroups after the undo removed them). In a group
	// of its own it is not sent the terminal's Ctrl-C either, and when
	// it hangs the whole group is killed.
	runCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), guest.ReadyTimeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, bin, append(global, "run", "--detach", "--pid-file", pidPath, "--bundle", bundleDir, g.id)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Run(); err != nil {
		log, _ := os.ReadFile(logPath)
		return fmt.Errorf("%s run: %w: %s", g.runtime, err, guest.Tail(log, 500))
	}
	return ctx.Err()
}

// rtRuntime is the container's real-time budget under cgroup v1
// real-time group scheduling; 0 when it needs none or the kernel keeps
// none per cgroup.
func (g *Guest) rtRuntime() int64 {
	if g.Spec().RTPriority == 0 || !rtGroupScheduling(cpuV1Dir) {
		return 0
	}
	return containerRTRuntimeUS
}

func (g *Guest) details(bin string, config *specs.Spec, appArmor, platform string) map[string]string {
	d := map[string]string{"container_id": g.id, "runtime_path": bin, "security": g.security, "apparmor": appArmor,
		"seccomp": seccompRecord(config.Linux.Seccomp), "no_new_privileges": strconv.FormatBool(config.Process.NoNewPrivileges)}
	if platform != "" {
		d["platform"], d["network_stack"] = platform, "gVisor's own, loopback only (runsc --network=none)"
		if g.Spec().NetNS != "" {
			d["network_stack"] = "host kernel's, in the guest's namespace (runsc --network=" + runscNetwork + ")"
		}
		d[guest.KernelDetail] = guest.KernelGVisor
		if config.Linux.Seccomp != nil {
			d["seccomp"] += ", in the bundle, not applied by runsc"
		}
	}
	if prio := g.Spec().RTPriority; prio > 0 {
		d["rt_priority"] = strconv.Itoa(prio)
		if rt := g.rtRuntime(); rt > 0 {
			d["rt_runtime_us"] = strconv.FormatInt(rt, 10)
		}
	}
	return d
}

// Package host implements the bare baseline guest kind: the agent and the
// measuring tools run as ordinary host processes — no namespaces, no cgroup
// limits, the host's scheduler, and the host's network or, in a run with a
// network, the run's host-side namespace — but chrooted into a
// copy-on-write view of the guest image, so the baseline runs the very same
// binaries and libraries as every other guest kind and writes to the same
// kind of filesystem.
//
// Lifecycle: Start records and creates the state directory, the overlay, the
// /proc, /sys and /dev binds the tools need, then starts the agent with
// chroot, in a cgroup of the run that holds everything it starts, and waits
// for it; Stop kills the agent, then what is left in its cgroup, and undoes
// the rest, newest first.
package host

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/guest/identity"
	"github.com/vfleet/vfleet/internal/guest/overlay"
)

// KindName is the name scenarios use for the baseline.
const KindName = "host"

func init() { guest.Register(kind{}) }

type kind struct{}

func (kind) Name() string { return KindName }

// Traits: the baseline is the host itself, confining nothing.
func (kind) Traits() guest.Traits { return guest.Traits{Bare: true} }

func (kind) Probe(_ context.Context, runtime string) error {
	if runtime != "" {
		return fmt.Errorf("%w: kind host takes no runtime (got %q)", guest.ErrNotSupported, runtime)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: the host baseline needs root (chroot and mounts)", guest.ErrNotSupported)
	}
	if err := overlay.Supported("/proc"); err != nil {
		return fmt.Errorf("%w: %v", guest.ErrNotSupported, err)
	}
	return nil
}

func (kind) New(spec guest.Spec, env guest.Env) (guest.Guest, error) {
	if spec.Runtime != "" {
		return nil, fmt.Errorf("guest %s: kind host takes no runtime (got %q)", spec.Name, spec.Runtime)
	}
	if spec.CPUs != "" || spec.MemoryBytes != 0 || spec.CPULimit != 0 {
		return nil, fmt.Errorf("guest %s: the host baseline runs without limits; cpus, cpu_limit and memory are not allowed", spec.Name)
	}
	if spec.RTPriority != 0 {
		return nil, fmt.Errorf("guest %s: the host baseline runs as root and may use real-time scheduling already; rt_priority is not allowed", spec.Name)
	}
	if err := guest.CheckSpec(KindName, spec); err != nil {
		return nil, fmt.Errorf("guest %s: %v", spec.Name, err)
	}
	if _, err := guest.SecurityOf(spec); err != nil {
		return nil, fmt.Errorf("guest %s: %v", spec.Name, err)
	}
	return &Guest{Base: guest.NewBase(spec), env: env, dir: filepath.Join(env.StateDir, spec.Name)}, nil
}

// Guest is a running baseline.
type Guest struct {
	*guest.Base
	env guest.Env
	dir string
}

func (g *Guest) Start(ctx context.Context) error { return g.Launch(ctx, g.start) }

func (g *Guest) start(ctx context.Context, undo *guest.Teardown) (*agent.Client, guest.Info, error) {
	if err := undo.MakeDir(g.env.Ledger, g.dir); err != nil {
		return nil, guest.Info{}, err
	}

	layer, err := overlay.Mount(g.env.Ledger, g.env.RootFS, g.dir)
	if err != nil {
		return nil, guest.Info{}, err
	}
	undo.Push(layer.Unmount)
	for _, p := range []string{"/proc", "/sys", "/dev"} {
		unbind, err := layer.Bind(p, p)
		if err != nil {
			return nil, guest.Info{}, err
		}
		undo.Push(unbind)
	}
	for _, d := range []string{guest.AgentSocketDir, guest.ScratchDir} {
		if err := os.MkdirAll(filepath.Join(layer.Merged, d), 0o755); err != nil {
			return nil, guest.Info{}, err
		}
	}
	// The baseline shares the host's UTS namespace: its name is the host's.
	hostname, err := os.Hostname()
	if err != nil {
		return nil, guest.Info{}, err
	}
	if err := identity.Write(layer.Merged, hostname); err != nil {
		return nil, guest.Info{}, err
	}
	if g.env.AgentBinary != "" {
		// A copy in the baseline's own upper layer: the user's image stays
		// as it is, and a bind of one file would need its mount point made
		// there anyway.
		if err := guest.CopyAgent(g.env.AgentBinary, filepath.Join(layer.Merged, g.env.AgentPath)); err != nil {
			return nil, guest.Info{}, err
		}
	}

	logf, err := os.Create(filepath.Join(g.dir, "agent.log"))
	if err != nil {
		return nil, guest.Info{}, err
	}
	defer logf.Close()
	cmd := exec.Command(g.env.AgentPath, "--listen", guest.AgentSocket, "--workdir", guest.ScratchDir)
	// The kernel resolves the path after the chroot, so it is the in-image path.
	cmd.Dir = "/"
	cmd.Env = g.env.ProcessEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = g.env.ProcAttr()
	cmd.SysProcAttr.Chroot = layer.Merged
	if err := g.env.StartContained(g.Spec().Name, cmd, func() error { return startIn(g.Spec().NetNS, cmd) }, undo); err != nil {
		return nil, guest.Info{}, fmt.Errorf("start agent: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	pidEntry, recErr := g.env.Ledger.RecordProcess(cmd.Process.Pid)
	undo.Push(func() error {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if recErr != nil {
			return nil
		}
		return g.env.Ledger.Done(pidEntry)
	})
	if recErr != nil {
		return nil, guest.Info{}, recErr
	}

	readyCtx, cancel := context.WithTimeout(ctx, guest.ReadyTimeout)
	defer cancel()
	go func() {
		select {
		case <-exited:
			cancel() // the agent died: stop waiting for it
		case <-readyCtx.Done():
		}
	}()
	agentAddr := filepath.Join(layer.Merged, guest.AgentSocket)
	client, err := agent.WaitReady(readyCtx, agentAddr)
	if err != nil {
		select {
		case <-exited:
			log, _ := os.ReadFile(logf.Name())
			return nil, guest.Info{}, fmt.Errorf("agent exited before it was ready: %s", guest.Tail(log, 400))
		default:
		}
		return nil, guest.Info{}, err
	}
	details := map[string]string{"isolation": "none (chroot into the image for identical binaries)", "security": guest.SecurityUnconfined}
	if g.Spec().NetNS != "" {
		details["netns"] = g.Spec().NetNS
	}
	return client, guest.Info{
		Kind:       KindName,
		PIDs:       []int{cmd.Process.Pid},
		ScratchDir: guest.ScratchDir,
		AgentAddr:  agentAddr,
		Details:    details,
	}, nil
}
